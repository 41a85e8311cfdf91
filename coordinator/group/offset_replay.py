"""The one replay of a group's offset records, shared by loading and by the runtime's writes
(Kafka's `OffsetMetadataManager.replay`): committed offset records (value None: a tombstone),
transactional offset records pending their producer's marker, and the markers. A record later
in the log than the offset held wins (two commits in flight are replayed in log order, and a
load keeps the latest record per key). The functions change the `groups` map given: the
coordinator's own groups for a write, a load's groups under construction for a load."""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping

from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.records import OffsetAndMetadata
from protocol.topic_partition import TopicPartition

Groups = MutableMapping[str, GroupMetadata]


def group_for_replay(groups: Groups, group_id: str) -> GroupMetadata:
    """The group a record of `group_id` applies to, created Empty when there is none (an
    offset commit of a "simple" consumer creates its group)."""
    group = groups.get(group_id)
    if group is None:
        group = groups[group_id] = GroupMetadata(group_id)
    return group


def replay_offsets(
    groups: Groups, group_id: str, offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata | None]], first_offset: int
) -> None:
    """Committed offset records of `group_id`, the i-th at log offset `first_offset + i`."""
    offsets = list(offsets)
    if group_id not in groups and all(om is None for _, om in offsets):
        return
    group = group_for_replay(groups, group_id)
    for i, (tp, om) in enumerate(offsets):
        if om is None:
            group.offsets.pop(tp, None)
            group.offset_log_offsets.pop(tp, None)
        elif group.offset_log_offsets.get(tp, -1) < first_offset + i:
            group.offsets[tp] = om
            group.offset_log_offsets[tp] = first_offset + i


def replay_pending_offsets(
    groups: Groups,
    group_id: str,
    producer_id: int,
    offsets: Iterable[tuple[TopicPartition, OffsetAndMetadata | None]],
    first_offset: int,
) -> None:
    """Offset records of `producer_id`'s open transaction (TxnOffsetCommit): held apart until its
    marker (`replay_marker`); a tombstone drops a pending one."""
    offsets = list(offsets)
    if group_id not in groups and all(om is None for _, om in offsets):
        return
    pending = group_for_replay(groups, group_id).pending_txn_offsets.setdefault(producer_id, {})
    for i, (tp, om) in enumerate(offsets):
        if om is None:
            pending.pop(tp, None)
        else:
            pending[tp] = (om, first_offset + i)


def replay_marker(groups: Iterable[GroupMetadata], producer_id: int, commit: bool) -> list[tuple[GroupMetadata, int]]:
    """`producer_id`'s transaction marker in the partition of `groups`: its pending offsets
    become committed (COMMIT) or are dropped (ABORT). Returns the groups whose offsets were
    committed, with how many."""
    committed = []
    for group in groups:
        pending = group.pending_txn_offsets.pop(producer_id, None)
        if not pending or not commit:
            continue
        for tp, (om, log_offset) in pending.items():
            if group.offset_log_offsets.get(tp, -1) < log_offset:
                group.offsets[tp] = om
                group.offset_log_offsets[tp] = log_offset
        committed.append((group, len(pending)))
    return committed
