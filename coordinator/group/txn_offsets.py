"""Offsets committed inside a transaction (KIP-98 / KIP-447): TxnOffsetCommit (key 28), their
completion by the transaction's marker, and OffsetFetch's `require_stable` (`TxnOffsetManager`, a
part of `GroupCoordinator`, as Kafka's GroupCoordinator.handleTxnCommitOffsets and
GroupMetadataManager.handleTxnCompletion).

- A TxnOffsetCommit is appended to the group's `__consumer_offsets` partition as a transactional
  batch of the producer; its offsets wait in `GroupMetadata.pending_txn_offsets` and are not
  served by OffsetFetch.
- When the transaction's COMMIT marker is in that partition (`complete_txn`, called by
  WriteTxnMarkers), they replace the committed ones unless a commit later in the log already did;
  on ABORT they are dropped.
- With v3+ (KIP-447) the member id and generation are checked as OffsetCommit checks them, so a
  zombie of an old generation cannot commit.
- `unstable_partitions`: the partitions with pending transactional offsets, which OffsetFetch with
  `require_stable` answers UNSTABLE_OFFSET_COMMIT (retriable).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from coordinator.group import offset_replay, records
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.offsets import consumer_commit_error
from coordinator.group.records import OffsetAndMetadata
from coordinator.runtime import CoordinatorResult, WriteFailed
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class TxnOffsetManager:
    """Transactional offsets of the groups this broker coordinates (a part of `GroupCoordinator`)."""

    def __init__(
        self,
        manager: GroupMetadataManager,
        group_error: Callable[..., ErrorCode],
        check_offsets: Callable[
            [dict[TopicPartition, OffsetAndMetadata]],
            tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]],
        ],
    ) -> None:
        """`group_error` and `check_offsets` are the coordinator's and the offsets' checks."""
        self.manager = manager
        self.group_error = group_error
        self.check_offsets = check_offsets

    async def txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: an error per partition (NONE once the records are appended)."""
        error = self.group_error(group_id, allow_empty=True)
        if error == ErrorCode.NONE:
            group = self.manager.groups.get(group_id) or GroupMetadata(group_id)  # created by the replay
            error = self._txn_member_error(group, generation_id, member_id, group_instance_id, offsets)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        results, valid = self.check_offsets(offsets)

        def replay(first: int) -> None:
            offset_replay.replay_pending_offsets(self.manager.groups, group_id, producer_id, valid.items(), first)

        def commit() -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
            return CoordinatorResult(
                records.offset_records(group_id, valid.items()),
                results | dict.fromkeys(valid, ErrorCode.NONE),
                replay,
                producer=(producer_id, producer_epoch),
            )

        try:
            return await self.manager.write(group_id, commit)
        except WriteFailed as e:
            return results | dict.fromkeys(valid, e.error_code)

    @staticmethod
    def _txn_member_error(
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Iterable[TopicPartition],
    ) -> ErrorCode:
        """Kafka's doTxnCommitOffsets checks (the member fields are v3+; defaults skip them)."""
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            # a consumer group (KIP-848): its member epoch, as OffsetCommit checks it; a stale
            # epoch is ILLEGAL_GENERATION here (Kafka's validateTransactionalOffsetCommit)
            error = consumer_commit_error(group.consumer, member_id, generation_id, offsets)
            return ErrorCode.ILLEGAL_GENERATION if error == ErrorCode.STALE_MEMBER_EPOCH else error
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def complete_txn(self, producer_id: int, offsets_partitions: list[int], commit: bool) -> None:
        """The producer's marker is in these `__consumer_offsets` partitions: its pending
        offsets in their groups are committed or dropped."""
        wanted = set(offsets_partitions)
        groups = [g for g in self.manager.groups.values() if self.manager.partition_for(g.group_id) in wanted]
        for group, count in offset_replay.replay_marker(groups, producer_id, commit):
            log.debug("group %s: %d transactional offsets of producer %d committed", group.group_id, count, producer_id)

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with offsets pending in an open transaction."""
        group = self.manager.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}
