"""Offsets committed inside a transaction (KIP-98 / KIP-447): TxnOffsetCommit (key 28), their
completion by the transaction's marker, and OffsetFetch's `require_stable` (mixed into
`GroupCoordinator`, as Kafka's GroupCoordinator.handleTxnCommitOffsets and
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
from typing import Any

from coordinator.group import records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.offsets import consumer_commit_error
from coordinator.group.records import OffsetAndMetadata
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


class TxnOffsetOperations:
    config: GroupCoordinatorConfig
    manager: GroupMetadataManager
    metadata_cache: Any
    wall_clock_ms: Callable[[], int]

    def group_error(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        raise NotImplementedError

    def _touch(self, member: MemberMetadata) -> None:
        raise NotImplementedError

    def check_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        raise NotImplementedError

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
        group = None
        if error == ErrorCode.NONE:
            group = self.manager.groups.get(group_id)
            if group is None:
                group = self.manager.groups[group_id] = GroupMetadata(group_id)
            error = self._txn_member_error(group, generation_id, member_id, group_instance_id, offsets)
        if error != ErrorCode.NONE:
            return dict.fromkeys(offsets, error)
        assert group is not None
        results, valid = self.check_offsets(offsets)
        if not valid:
            return results
        entries = [(records.offset_key(group_id, t, p), records.offset_value(om)) for (t, p), om in valid.items()]
        error, base_offset = await self.manager.append(group_id, entries, producer=(producer_id, producer_epoch))
        if error == ErrorCode.NONE and self.manager.groups.get(group_id) is group:
            pending = group.pending_txn_offsets.setdefault(producer_id, {})
            for i, (tp, om) in enumerate(valid.items()):
                pending[tp] = (om, base_offset + i)
        results.update(dict.fromkeys(valid, error))
        return results

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
        for group in list(self.manager.groups.values()):
            if self.manager.partition_for(group.group_id) not in wanted:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not commit:
                continue
            for tp, (om, log_offset) in pending.items():
                if group.offset_log_offsets.get(tp, -1) < log_offset:
                    group.offsets[tp] = om
                    group.offset_log_offsets[tp] = log_offset
            log.debug(
                "group %s: %d transactional offsets of producer %d committed", group.group_id, len(pending), producer_id
            )

    def unstable_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of the group with offsets pending in an open transaction."""
        group = self.manager.groups.get(group_id)
        if group is None:
            return set()
        return {tp for pending in group.pending_txn_offsets.values() for tp in pending}
