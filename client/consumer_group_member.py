"""One member of a consumer group speaking KIP-848's consumer protocol (ConsumerGroupHeartbeat,
API key 68): the broker assigns, the member only reports what it owns. Same interface as the
classic `client.groups.GroupMember`, so the CLI drives either:

- `join()` heartbeats with member epoch 0 (or the current epoch) until the broker has answered
  with an assignment, applies any assignment received since, and returns it {topic: [partitions]};
- `heartbeat()` sends the owned partitions and returns False when the assignment changed (the
  caller commits what it read, then calls `join()` to take the new one: revoked partitions are
  reported given up only then, so the broker hands them on after the commit);
- `commit()` commits with the member epoch (OffsetCommit v9), False when the epoch is stale or
  the member was fenced (rejoin); `leave()` sends epoch -1.
FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID lose the partitions and rejoin with epoch 0. The heartbeat
interval is the broker's (`heartbeat_interval_s`).
"""

from __future__ import annotations

import uuid

import trio

from client.cluster import Cluster
from client.connection import Connection
from client.groups import _commit_body, _raise, committed_offsets, coordinator_connection, starting_positions
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

FENCED = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}


class ConsumerGroupMember:
    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: list[str],
        *,
        rebalance_timeout_ms: int = 30000,
        client_id: str = "minikafka-consumer",
        server_assignor: str | None = None,
        instance_id: str | None = None,
    ):
        self.cluster, self.group_id, self.topics = cluster, group_id, topics
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.server_assignor = server_assignor
        self.instance_id = instance_id
        self.member_id = str(uuid.uuid4())  # KIP-1082: the member generates its id
        self.member_epoch = 0
        self.assignment: dict[str, list[int]] = {}
        self.rejoin_needed = False
        self.heartbeat_interval_s = 1.0
        self._pending: dict[str, list[int]] | None = None  # received, not yet taken by join()
        self._conn: Connection | None = None

    async def _coordinator(self, refresh: bool = False) -> Connection:
        """The coordinator's connection, found once and kept until it breaks or `refresh`
        (a heartbeat is one request, not a metadata + FindCoordinator round each time)."""
        if refresh or self._conn is None or self._conn.closed:
            self._conn = await coordinator_connection(self.cluster, self.group_id, refresh)
        return self._conn

    def _owned(self) -> list[dict]:
        ids = self.cluster.metadata.topic_ids
        return [{"topic_id": ids[t], "partitions": sorted(ps)} for t, ps in self.assignment.items() if t in ids and ps]

    async def _beat(self, full: bool, refresh: bool = False) -> None:
        """One ConsumerGroupHeartbeat; `full` sends the subscription (a join, or after fencing);
        `refresh` finds the coordinator again first."""
        joining = self.member_epoch == 0
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "instance_id": self.instance_id,
            "rack_id": None,
            "rebalance_timeout_ms": self.rebalance_timeout_ms if full or joining else -1,
            "subscribed_topic_names": list(self.topics) if full or joining else None,
            "server_assignor": self.server_assignor if full or joining else None,
            "topic_partitions": [] if joining else self._owned(),
        }
        conn = await self._coordinator(refresh)
        r = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=0)
        if r.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self._conn = None  # found again on the retry
        if r.error_code in FENCED:
            self.member_epoch, self.assignment, self._pending = 0, {}, None
            self.rejoin_needed = True
            return
        _raise(r.error_code, f"heartbeat to group {self.group_id}: {r.error_message or ''}")
        self.member_id = r.member_id or self.member_id
        self.member_epoch = r.member_epoch
        self.heartbeat_interval_s = max(r.heartbeat_interval_ms, 100) / 1000
        if r.assignment is not None:
            await self._received(r.assignment.topic_partitions)

    async def _received(self, topic_partitions) -> None:
        ids = self.cluster.metadata.topic_ids
        if any(tp.topic_id not in ids.values() for tp in topic_partitions):
            await self.cluster.refresh_metadata(list(self.topics))
            ids = self.cluster.metadata.topic_ids
        names = {tid: name for name, tid in ids.items()}
        new = {names[tp.topic_id]: sorted(tp.partitions) for tp in topic_partitions if tp.topic_id in names}
        if new != self.assignment:
            self._pending = new

    async def join(self) -> dict[str, list[int]]:
        """Join (or take the assignment received since the last call); returns it. The topics'
        ids (Metadata) are asked for once joined, and again when an assignment names one not
        known yet (a topic created since)."""

        async def attempt(refresh: bool) -> dict[str, list[int]]:
            await self._beat(self.member_epoch == 0, refresh)
            if any(t not in self.cluster.metadata.topic_ids for t in self.topics):
                # the topic ids, learnt while the group reconciles (an assignment names ids)
                await self.cluster.refresh_metadata(list(self.topics))
            while self.member_epoch == 0 or (self.rejoin_needed and self._pending is None and not self.assignment):
                self.rejoin_needed = False
                await trio.sleep(0.1)
                await self._beat(self.member_epoch == 0)
            if self._pending is not None:
                self.assignment, self._pending = self._pending, None
                await self._beat(False)  # report what is owned now: revocations are acknowledged
                if self._pending is not None:
                    self.assignment, self._pending = self._pending, None
            self.rejoin_needed = False
            return self.assignment

        return await self.cluster.retry(attempt, "ConsumerGroupHeartbeat")

    async def heartbeat(self) -> bool:
        """False when the member must take a new assignment (call `join()`)."""
        await self.cluster.retry(lambda refresh: self._beat(False, refresh), "ConsumerGroupHeartbeat")
        return self._pending is None and not self.rejoin_needed

    async def committed(self) -> dict[TopicPartition, int]:
        return await committed_offsets(self.cluster, self.group_id)

    async def starting_positions(self, topic: str, reset: int) -> dict[int, int]:
        return await starting_positions(self.cluster, self.group_id, topic, self.assignment.get(topic, []), reset)

    async def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit with the member epoch (OffsetCommit v9); False when the member must rejoin."""
        if not offsets:
            return True
        conn = await self._coordinator()
        body = _commit_body(self.group_id, offsets, self.member_epoch, self.member_id, self.instance_id)
        r = await conn.request(ApiKey.OFFSET_COMMIT, body, version=9)
        codes = {p.error_code for t in r.topics for p in t.partitions}
        if codes & (FENCED | {ErrorCode.STALE_MEMBER_EPOCH}):
            if codes & FENCED:
                self.member_epoch, self.assignment = 0, {}
            self.rejoin_needed = True
            return False
        for code in codes:
            _raise(code, f"committing offsets of group {self.group_id}")
        return True

    async def leave(self) -> None:
        with trio.move_on_after(5):
            try:
                conn = await self._coordinator()
                await conn.request(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT,
                    {
                        "group_id": self.group_id,
                        "member_id": self.member_id,
                        "member_epoch": -2 if self.instance_id else -1,
                        "instance_id": self.instance_id,
                    },
                    version=0,
                )
            except Exception:
                pass  # the session timeout removes us anyway
