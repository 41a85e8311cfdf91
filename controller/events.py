"""The events the controller's single loop processes (Kafka `ControllerEvent`s, ZooKeeper mode).

ZooKeeper watches, the broker's session handling and requests forwarded by the broker's handlers
each post one of these; `KafkaController` maps every type to its handler in one table and refuses
an event type that is not in it. Events that carry `reply` answer their poster (a handler waiting
for CreatePartitions, ControlledShutdown, ...); while this broker is not the active controller they
are answered with NOT_CONTROLLER, and the other non-election events are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.topic_partition import TopicPartition

Reply = Callable[[Any], None]


@dataclass(frozen=True)
class ControllerEvent:
    """Base of every event. `needs_active`: processed only by the active controller."""

    needs_active = True


# ---- election (processed whether active or not) -----------------------------------------------
@dataclass(frozen=True)
class ControllerChange(ControllerEvent):
    """/controller changed: `controller_id` is its new owner, None when it was deleted."""

    controller_id: int | None
    needs_active = False


@dataclass(frozen=True)
class Reelect(ControllerEvent):
    """Run for controller (a new ZooKeeper session, or the broker asking)."""

    needs_active = False


@dataclass(frozen=True)
class Expire(ControllerEvent):
    """The ZooKeeper session expired: resign (Kafka `Expire`)."""

    needs_active = False


# ---- ZooKeeper notifications ---------------------------------------------------------------------
@dataclass(frozen=True)
class BrokerChange(ControllerEvent):
    """/brokers/ids children."""

    children: tuple[str, ...]


@dataclass(frozen=True)
class TopicChange(ControllerEvent):
    """/brokers/topics children."""

    children: tuple[str, ...]


@dataclass(frozen=True)
class TopicDeletion(ControllerEvent):
    """/admin/delete_topics children."""

    children: tuple[str, ...]


@dataclass(frozen=True)
class IsrChangeNotification(ControllerEvent):
    """/isr_change_notification children when the watch fired (the handler reads them afresh;
    one such event waits in the queue at most)."""

    children: tuple[str, ...]


@dataclass(frozen=True)
class LogDirEventNotification(ControllerEvent):
    """/log_dir_event_notification children (a broker's log dir failed) when the watch fired
    (the handler reads them afresh; one such event waits in the queue at most)."""

    children: tuple[str, ...]


@dataclass(frozen=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    """A broker's answer to a LeaderAndIsr: partitions answered KAFKA_STORAGE_ERROR are offline
    replicas (their log dir failed), whose leadership moves."""

    broker_id: int
    response: Any


@dataclass(frozen=True)
class ReplicaLeaderElection(ControllerEvent):
    """/admin/preferred_replica_election: the partitions listed there, None when it is absent."""

    partitions: tuple[TopicPartition, ...] | None


@dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    """The periodic imbalance check (auto.leader.rebalance.enable)."""


# ---- requests forwarded by the broker (each with a reply) -----------------------------------------
@dataclass(frozen=True)
class DeleteTopics(ControllerEvent):
    """DeleteTopics (key 20): replies with [(name, error code)]."""

    names: tuple[str, ...]
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """ControlledShutdown (key 7): replies with (error code, partitions the broker still leads).
    `broker_epoch` is None for v0-1, which do not carry it."""

    broker_id: int
    broker_epoch: int | None
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class ElectPreferredLeaders(ControllerEvent):
    """ElectLeaders (key 43), preferred: `partitions` None means all; replies {tp: error code}."""

    partitions: tuple[TopicPartition, ...] | None
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class CreatePartitions(ControllerEvent):
    """CreatePartitions (key 37): replies [{name, error_code, error_message}]."""

    body: Any
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class ElectUncleanLeaders(ControllerEvent):
    """ElectLeaders (key 43), unclean: `partitions` None means all; replies {tp: error code}."""

    partitions: tuple[TopicPartition, ...] | None
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class AlterPartitionReassignments(ControllerEvent):
    """AlterPartitionReassignments (key 45): `requests` partition -> target replicas (None:
    cancel); replies {tp: (error code, message)}."""

    requests: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class ListPartitionReassignments(ControllerEvent):
    """ListPartitionReassignments (key 46): `partitions` None means all; replies {tp: Reassignment}."""

    partitions: tuple[TopicPartition, ...] | None
    reply: Reply = field(compare=False)


@dataclass(frozen=True)
class LegacyReassignment(ControllerEvent):
    """/admin/reassign_partitions was written (or deleted: data None)."""

    data: bytes | None
