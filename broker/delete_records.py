"""DeleteRecords on the leaders of this broker (Kafka's `ReplicaManager.deleteRecords` with its
`DelayedDeleteRecords`).

Each partition's log start offset is raised on the leader (`Partition.delete_records_on_leader`),
the log start offsets are checkpointed, and the answer waits until the low watermark (the smallest
log start offset over the leader and its in-sync followers, which learn the leader's from their
fetch responses and report theirs in their next fetch) reaches the requested offset, or until
`timeout_ms` (REQUEST_TIMED_OUT). Whole segments below the new log start offset are deleted by each
replica's next retention check (`log.retention.check.interval.ms`), as in Kafka.
"""

from __future__ import annotations

import trio

from broker.errors import error_code_for
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.topic_names import INTERNAL_TOPICS
from protocol.topic_partition import TopicPartition


async def delete_records(
    rm: ReplicaManager, offsets: dict[TopicPartition, int], timeout_ms: int
) -> dict[TopicPartition, tuple[int, ErrorCode]]:
    """`offsets`: partition -> the offset to delete below (-1: the high watermark). Returns
    partition -> (low watermark, error code); the low watermark is -1 with an error.
    An internal topic's partition is INVALID_TOPIC_EXCEPTION ("Cannot delete records of internal
    topic", Kafka's `ReplicaManager.deleteRecordsOnLocalLog`) and keeps its log start offset."""
    results: dict[TopicPartition, tuple[int, ErrorCode]] = {}
    requested: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        if tp[0] in INTERNAL_TOPICS:  # Kafka's ReplicaManager.deleteRecordsOnLocalLog refuses these
            results[tp] = (-1, ErrorCode.INVALID_TOPIC_EXCEPTION)
            continue
        try:
            requested[tp] = rm.get_partition(*tp).delete_records_on_leader(offset)
            rm.partition_changed(tp)  # the followers learn the new log start offset in their next answer
        except Exception as e:
            results[tp] = (-1, error_code_for(e))
    if not requested:
        return results
    log_manager = rm.log_manager
    await trio.to_thread.run_sync(log_manager.write_checkpoints, log_manager.checkpoint_snapshot())

    def low_watermark(tp: TopicPartition) -> int | None:
        partition = rm.partitions.get(tp)
        return partition.low_watermark() if partition is not None and partition.is_leader else None

    def reached() -> bool:
        """Every partition's low watermark reached its offset (or it lost leadership: answer now)."""
        for tp, offset in requested.items():
            low = low_watermark(tp)
            if low is not None and low < offset:
                return False
        return True

    await rm.watchers.wait_for(list(requested), reached, timeout_ms / 1000)
    for tp, offset in requested.items():
        low = low_watermark(tp)
        if low is None:
            results[tp] = (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            results[tp] = (low, ErrorCode.NONE if low >= offset else ErrorCode.REQUEST_TIMED_OUT)
    return results
