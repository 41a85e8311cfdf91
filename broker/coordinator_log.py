"""The replica manager as the coordinators see it (Kafka's `CoordinatorPartitionWriter`):
`coordinator.runtime.PartitionLog` over `ReplicaManager`, so the coordinator packages import no
broker code. Appends take the one append path with origin COORDINATOR and acks=-1."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from coordinator.runtime import AppendOutcome
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.append_origin import AppendOrigin
from storage.log import Log

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager


class CoordinatorPartitionLog:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    async def append(self, tp: TopicPartition, records: bytes, timeout_ms: int) -> AppendOutcome:
        """Append `records` (whole v2 batches, trusted: origin COORDINATOR) to a partition this
        broker leads; returns once the HW covers them (NONE, first offset) or with the append
        path's error (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, MESSAGE_TOO_LARGE, ...)."""
        rm = self.replica_manager
        outcome = (await rm.append_records_and_wait({tp: records}, -1, timeout_ms, AppendOrigin.COORDINATOR))[tp]
        if outcome.error == ErrorCode.NONE and outcome.info is not None:
            return AppendOutcome(ErrorCode.NONE, outcome.info.first_offset, None)
        return AppendOutcome(outcome.error, -1, outcome.message or f"append to {tp[0]}-{tp[1]}: {outcome.error.name}")

    async def delete_below(self, tp: TopicPartition, offset: int) -> None:
        """Raise the log start offset of a coordinator partition led here (Kafka's
        `ReplicaManager.deleteRecords` with internal topics allowed) and checkpoint it; the
        followers learn it from their fetches, whole segments go at the next retention check."""
        self.replica_manager.get_partition(*tp).delete_records_on_leader(offset)
        log_manager = self.replica_manager.log_manager
        await trio.to_thread.run_sync(log_manager.write_checkpoints, log_manager.checkpoint_snapshot())

    def log(self, tp: TopicPartition) -> Log:
        """The local log of a partition hosted here (raises UnknownTopicOrPartition,
        NotLeaderOrFollower, KafkaStorageError as `ReplicaManager.get_partition`)."""
        return self.replica_manager.get_partition(*tp).log
