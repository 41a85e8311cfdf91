"""The controller's view of the cluster (Kafka `ControllerContext`), loaded from ZooKeeper on
failover and changed only by the controller's single event loop (so it needs no locks).
Partition states are named and moved by `controller.partition_state_machine`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from protocol.topic_partition import TopicPartition
from zk.znodes import BrokerRegistration, LeaderIsr


@dataclass
class Reassignment:
    """An ongoing partition reassignment (KIP-455): the target replica set, the replicas being
    added (target minus origin) and removed (origin minus target); `legacy`: it was requested
    through /admin/reassign_partitions, which is updated when it completes."""

    target: list[int]
    adding: list[int]
    removing: list[int]
    legacy: bool = False


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    live_brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    leadership: dict[TopicPartition, LeaderIsr] = field(default_factory=dict)
    partition_states: dict[TopicPartition, str] = field(default_factory=dict)
    #: broker -> its replicas in a failed log dir (Kafka's OfflineReplica), until it re-registers
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)
    #: ongoing reassignments; the assignment holds the full replica set (target + origin) meanwhile
    reassignments: dict[TopicPartition, Reassignment] = field(default_factory=dict)

    def offline_on(self, tp: TopicPartition) -> set[int]:
        """The brokers whose replica of `tp` is offline (its log dir failed)."""
        return {b for b, tps in self.offline_replicas.items() if tp in tps}

    @property
    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    def replicas(self, tp: TopicPartition) -> list[int]:
        return self.assignments.get(tp[0], {}).get(tp[1], [])

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in self.assignments.items() for p in parts]

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return [(topic, p) for p in self.assignments.get(topic, {})]

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.leadership.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.reassignments.pop(tp, None)
        self.assignments.pop(topic, None)
        self.topic_ids.pop(topic, None)
