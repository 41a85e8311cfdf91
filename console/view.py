"""The cluster as the console shows it: every reachable broker's snapshot (`console.snapshot`)
merged, pure. The serving broker's metadata cache gives brokers, controller and partition
states (what its clients would be told); each replica's LEO / HW / log start comes from the
broker that holds it, and the leader's view of its followers from the leader. A view is built
once every snapshot is in (its lookups are indexed on first use) and read by one page."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property


@dataclass
class ClusterView:
    serving: int  # the broker whose console this is
    snapshots: dict[int, dict]  # broker id -> its snapshot
    unreachable: dict[int, str] = field(default_factory=dict)  # broker id -> why its snapshot is missing

    @property
    def own(self) -> dict:
        return self.snapshots[self.serving]

    @property
    def controller_id(self) -> int:
        return self.own["controller_id"]

    @property
    def controller_epoch(self) -> int:
        return max(s["controller_epoch"] for s in self.snapshots.values())

    @property
    def brokers(self) -> list[dict]:
        return self.own["brokers"]

    def topics(self) -> dict[str, list[dict]]:
        """{topic: [partition state, by partition]} from the serving broker's metadata."""
        out: dict[str, list[dict]] = {}
        for p in self.own["partitions"]:
            out.setdefault(p["topic"], []).append(p)
        return out

    @cached_property
    def _partitions(self) -> dict[tuple[str, int], dict]:
        return {(p["topic"], p["partition"]): p for p in self.own["partitions"]}

    @cached_property
    def _replicas(self) -> dict[int, dict[tuple[str, int], dict]]:
        """{broker id: {(topic, partition): the replica as that broker reports it}}."""
        return {
            broker_id: {(r["topic"], r["partition"]): r for r in snapshot["replicas"]}
            for broker_id, snapshot in self.snapshots.items()
        }

    def partition(self, topic: str, partition: int) -> dict | None:
        return self._partitions.get((topic, partition))

    def offline(self) -> list[dict]:
        """Partitions without a live leader."""
        live = {b["id"] for b in self.brokers}
        return [p for p in self.own["partitions"] if p["leader"] < 0 or p["leader"] not in live]

    def under_replicated(self) -> list[dict]:
        """Partitions whose ISR is smaller than their replica set."""
        return [p for p in self.own["partitions"] if len(p["isr"]) < len(p["replicas"])]

    def replica(self, topic: str, partition: int, broker_id: int) -> dict | None:
        """The replica as its own broker reports it (leo, hw, log_start), or None when that
        broker's snapshot is missing or it holds no such replica."""
        return self._replicas.get(broker_id, {}).get((topic, partition))

    def follower_as_leader_sees_it(self, topic: str, partition: int, broker_id: int) -> dict | None:
        state = self.partition(topic, partition)
        if state is None:
            return None
        leader = self.replica(topic, partition, state["leader"])
        return None if leader is None else leader["followers"].get(str(broker_id))

    def high_watermark(self, topic: str, partition: int) -> int | None:
        state = self.partition(topic, partition)
        leader = self.replica(topic, partition, state["leader"]) if state else None
        return None if leader is None else leader["hw"]

    def groups(self) -> list[dict]:
        """Every coordinator's groups (`_with_lag`), by group id."""
        return sorted((self._with_lag(b, g) for b, g in self._coordinated_groups()), key=lambda g: g["group_id"])

    def group(self, group_id: str) -> dict | None:
        return next((self._with_lag(b, g) for b, g in self._coordinated_groups() if g["group_id"] == group_id), None)

    def _coordinated_groups(self):
        """(coordinator id, group snapshot) for every group, by coordinator id."""
        for broker_id, snapshot in sorted(self.snapshots.items()):
            for g in snapshot["groups"]:
                yield broker_id, g

    def _with_lag(self, coordinator: int, g: dict) -> dict:
        """The group with `coordinator` and `lag`: {(topic, partition): HW - committed} for the
        partitions whose leader's HW is known."""
        lag = {}
        for topic, partition, offset in g["committed"]:
            hw = self.high_watermark(topic, partition)
            if hw is not None:
                lag[(topic, partition)] = max(0, hw - offset)
        if g["type"] == "share":  # a share group's lag is its share-partitions' (records not done)
            lag = {(sp["topic"], sp["partition"]): sp["lag"] for sp in self.share_partitions(g["group_id"])}
        return {**g, "coordinator": coordinator, "lag": lag}

    def share_partitions(self, group_id: str) -> list[dict]:
        """A share group's share-partitions as their leaders hold them (KIP-932), each with
        `leader`: the broker it came from; by topic and partition."""
        out = [
            {**sp, "leader": broker_id}
            for broker_id, snapshot in sorted(self.snapshots.items())
            for sp in snapshot.get("share_partitions", [])
            if sp["group_id"] == group_id
        ]
        return sorted(out, key=lambda sp: (sp["topic"], sp["partition"]))

    def transactions(self) -> list[dict]:
        out = [
            {**t, "coordinator": broker_id}
            for broker_id, snapshot in sorted(self.snapshots.items())
            for t in snapshot["transactions"]
        ]
        return sorted(out, key=lambda t: t["transactional_id"])
