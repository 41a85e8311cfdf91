"""What this broker knows of the cluster, as the controller last told it (UpdateMetadata).

Kafka's `ZkMetadataCache`: live brokers with their endpoints, the controller id, and every
partition's leader, leader epoch, ISR, replicas and offline replicas; Metadata requests are
answered from here. Pure state, no I/O: `update()` takes a decoded UpdateMetadata body (any
version 0-8). A partition whose leader is -2 (LeaderDuringDelete) is removed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from protocol.errors import ErrorCode
from protocol.topic_names import INTERNAL_TOPICS, is_valid_topic_name
from protocol.types import ZERO_UUID

log = logging.getLogger(__name__)

LEADER_DURING_DELETE = -2
NO_LEADER = -1


@dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker: its inter-broker endpoint (`host`, `port`) and every listener's."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()  # (listener name, host, port)

    def on(self, listener: str) -> tuple[str, int]:
        """(host, port) of `listener` (what a client connected to that listener is told, as
        Kafka's Metadata does); the inter-broker endpoint when the broker lacks it."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0


def partition_states(body) -> list:
    """Flatten the partition states of a LeaderAndIsr (v2+) / UpdateMetadata (v5+) body, grouped
    per topic, into dicts carrying `topic_name` and `topic_id`."""
    out = []
    for topic in body.topic_states:
        for p in topic.partition_states:
            p = dict(p)
            p["topic_name"] = topic.topic_name
            p["topic_id"] = topic.get("topic_id", ZERO_UUID)
            out.append(p)
    return out


@dataclass
class MetadataCache:
    listener: str = "PLAINTEXT"
    controller_id: int = -1
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionState]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    #: an UpdateMetadata was applied: the cache knows the cluster (until then it lists no broker)
    updated: bool = False
    #: set (and replaced) by every update: what `wait_until` waits on
    _update_event: trio.Event = field(default_factory=trio.Event, repr=False)
    #: grows with every update (for views derived from the cache)
    version: int = 0
    _names_by_id: tuple[int, dict[uuid.UUID, str]] = field(default=(-1, {}), repr=False)

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name (KIP-516), rebuilt after an update (or a test's change of
        `version`); not to be changed by the caller."""
        if self._names_by_id[0] != self.version:
            self._names_by_id = (self.version, {found: name for name, found in self.topic_ids.items()})
        return self._names_by_id[1]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with `topic_id`, None when the cache has none."""
        return self.topic_names().get(topic_id)

    def update(self, body) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata body; returns the partitions it deleted. Topics whose names
        break Kafka's rule are left out."""
        self.updated = True
        self.version += 1
        self._update_event.set()
        self._update_event = trio.Event()
        self.controller_id = body.controller_id
        brokers = {}
        for b in body.live_brokers:
            if not b.endpoints:  # a registration without listeners cannot be reached
                continue
            ep = next((e for e in b.endpoints if e.listener == self.listener), b.endpoints[0])
            listeners = tuple((e.listener, e.host, e.port) for e in b.endpoints)
            brokers[b.id] = BrokerEndpoint(b.id, ep.host, ep.port, b.rack, listeners)
        self.brokers = brokers
        deleted = []
        for p in partition_states(body):
            topic, index = p["topic_name"], p["partition_index"]
            if not is_valid_topic_name(topic):
                log.error("UpdateMetadata names an illegal topic %r: left out of the metadata cache", topic)
                continue
            if p["leader"] == LEADER_DURING_DELETE:
                self.partitions.get(topic, {}).pop(index, None)
                if not self.partitions.get(topic):
                    self.partitions.pop(topic, None)
                    self.topic_ids.pop(topic, None)
                deleted.append((topic, index))
                continue
            self.partitions.setdefault(topic, {})[index] = PartitionState(
                topic,
                index,
                p["leader"],
                p["leader_epoch"],
                tuple(p["isr"]),
                tuple(p["replicas"]),
                tuple(p.get("offline_replicas", ())),
                p.get("zk_version", 0),
                p["controller_epoch"],
            )
            topic_id = p.get("topic_id", ZERO_UUID)
            if topic_id != ZERO_UUID:
                self.topic_ids[topic] = topic_id
        return deleted

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, checking it again after each update (bound it with
        a cancel scope)."""
        while not predicate():
            await self._update_event.wait()

    def get_partition(self, topic: str, partition: int) -> PartitionState | None:
        return self.partitions.get(topic, {}).get(partition)

    def leader_broker(self, topic: str, partition: int) -> BrokerEndpoint | None:
        """The live broker leading the partition (None: unknown partition, no leader, or a
        leader not registered)."""
        state = self.get_partition(topic, partition)
        return self.brokers.get(state.leader) if state is not None else None

    def topic_metadata(self, topic: str) -> dict:
        """One topic of a Metadata response (v1-12 field names)."""
        parts = self.partitions.get(topic)
        if not parts:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": topic, "partitions": []}
        out = []
        for index in sorted(parts):
            s = parts[index]
            # v1+ report dead replicas in offline_replicas, with no partition error (as Kafka).
            error = ErrorCode.LEADER_NOT_AVAILABLE if s.leader not in self.brokers else ErrorCode.NONE
            out.append(
                {
                    "error_code": error,
                    "partition_index": index,
                    "leader_id": s.leader if s.leader in self.brokers else NO_LEADER,
                    "leader_epoch": s.leader_epoch,
                    "replica_nodes": list(s.replicas),
                    "isr_nodes": list(s.isr),
                    "offline_replicas": list(s.offline_replicas),
                }
            )
        return {
            "error_code": ErrorCode.NONE,
            "name": topic,
            "topic_id": self.topic_ids.get(topic, ZERO_UUID),
            "is_internal": topic in INTERNAL_TOPICS,
            "partitions": out,
            "topic_authorized_operations": -2147483648,
        }
