"""The share coordinator's state for the partitions of `__share_group_state` it leads (Kafka's
`ShareCoordinatorShard`), as pure state: every operation returns a `CoordinatorResult` (the
records to append, the answer, and the replay that applies the records once committed); nothing
changes before the runtime commits.

- `write_state` (WriteShareGroupState, key 85): a leader's new state batches and start offset
  for one share-partition, merged into what is stored (`state_batches.combine`). Refused with
  FENCED_LEADER_EPOCH when the writer's leader epoch is older than the stored one and
  FENCED_STATE_EPOCH when its state epoch is. Written as an update record, or as a snapshot of
  the whole state for the first write and after `snapshot_every` updates.
- `read_state` (ReadShareGroupState, 84): the stored state; a share-partition never written
  answers start offset -1 (uninitialized). A read by a newer leader epoch records that epoch (so
  the older leader's writes are fenced from then on); an older one is FENCED_LEADER_EPOCH.
- `read_summary` (ReadShareGroupStateSummary, 87): start offset, state and leader epoch and the
  delivery-complete count, without recording anything.
- `initialize_state` (InitializeShareGroupState, 83): a new state epoch and start offset (a
  snapshot without batches); a state epoch not newer than the stored one is FENCED_STATE_EPOCH.
- `delete_state` (DeleteShareGroupState, 86): tombstones for the share-partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from coordinator.runtime import CoordinatorResult
from coordinator.share import records
from coordinator.share.records import (
    UNINITIALIZED,
    SharePartitionKey,
    ShareState,
    ShareUpdate,
    StateBatch,
    StateWrite,
)
from coordinator.share.state_batches import combine, normalize
from protocol.errors import ErrorCode


@dataclass(frozen=True)
class StateResult:
    """One partition's answer to a share-state request (the fields its API carries)."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED
    delivery_complete_count: int = -1
    batches: list[StateBatch] = field(default_factory=list)


def _refused(code: ErrorCode, message: str) -> CoordinatorResult[StateResult]:
    return CoordinatorResult([], StateResult(code, message))


class ShareCoordinatorShard:
    def __init__(self, snapshot_every: int, clock_ms: Callable[[], int]) -> None:
        """`snapshot_every`: share.coordinator.snapshot.update.records.per.snapshot; `clock_ms`:
        the wall clock (ms since the epoch) for the snapshots' timestamps."""
        self.snapshot_every = snapshot_every
        self.clock_ms = clock_ms
        self.states: dict[SharePartitionKey, ShareState] = {}
        self.updates_since_snapshot: dict[SharePartitionKey, int] = {}
        #: the offset in `__share_group_state` of each state's latest snapshot: every record of
        #: the key before it is redundant (replaying from the snapshot gives the same state)
        self.snapshot_offsets: dict[SharePartitionKey, int] = {}

    # ---- replay ----------------------------------------------------------------------------------
    def replay(self, key: SharePartitionKey, value: ShareState | ShareUpdate | None, offset: int = -1) -> None:
        """Apply one committed record (a load, or a write once committed) found at `offset`."""
        if value is None:
            self.states.pop(key, None)
            self.updates_since_snapshot.pop(key, None)
            self.snapshot_offsets.pop(key, None)
        elif isinstance(value, ShareState):
            self.states[key] = value
            self.updates_since_snapshot[key] = 0
            self.snapshot_offsets[key] = offset
        else:
            current = self.states.get(key)
            if current is None or value.snapshot_epoch != current.snapshot_epoch:
                return  # an update of an older snapshot (or of a deleted state): superseded
            self.states[key] = _updated(current, value)
            self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    def forget(self, keep: Callable[[SharePartitionKey], bool]) -> None:
        """Drop the states `keep` rejects (a partition of the topic no longer led here)."""
        for key in [k for k in self.states if not keep(k)]:
            del self.states[key]
            self.updates_since_snapshot.pop(key, None)
            self.snapshot_offsets.pop(key, None)

    def redundant_below(self, mine: Callable[[SharePartitionKey], bool], replayed_up_to: int) -> int:
        """The offset of `__share_group_state`'s partition below which no record is needed (the
        earliest latest-snapshot of its keys, `mine`), at most `replayed_up_to` (the first offset
        of the last write replayed: what is being written now is kept)."""
        offsets = [o for k, o in self.snapshot_offsets.items() if mine(k) and o >= 0]
        return min([*offsets, replayed_up_to])

    # ---- operations ------------------------------------------------------------------------------
    def write_state(self, key: SharePartitionKey, write: StateWrite) -> CoordinatorResult[StateResult]:
        state_epoch, leader_epoch, start_offset, delivery_complete_count, batches = write
        bad = next((b for b in batches if not _valid(b)), None)
        if bad is not None:
            return _refused(ErrorCode.INVALID_REQUEST, f"state batch {tuple(bad)} is not a valid range and state")
        current = self.states.get(key)
        if current is not None:
            if leader_epoch != -1 and leader_epoch < current.leader_epoch:
                return _refused(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} < {current.leader_epoch}")
            if state_epoch < current.state_epoch:
                return _refused(ErrorCode.FENCED_STATE_EPOCH, f"state epoch {state_epoch} < {current.state_epoch}")
        now = self.clock_ms()
        if current is None or self.updates_since_snapshot.get(key, 0) >= self.snapshot_every:
            base = current or ShareState(create_timestamp=now)
            update = ShareUpdate(
                base.snapshot_epoch, leader_epoch, start_offset, delivery_complete_count, tuple(batches)
            )
            merged = _updated(base, update)
            snapshot = replace(
                merged,
                snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
                state_epoch=max(state_epoch, base.state_epoch),
                write_timestamp=now,
            )
            record = records.snapshot_record(key, snapshot)
            value: ShareState | ShareUpdate = snapshot
        else:
            value = ShareUpdate(
                current.snapshot_epoch, leader_epoch, start_offset, delivery_complete_count, tuple(batches)
            )
            record = records.update_record(key, value)
        return CoordinatorResult([record], StateResult(), lambda offset: self.replay(key, value, offset))

    def read_state(self, key: SharePartitionKey, leader_epoch: int) -> CoordinatorResult[StateResult]:
        current = self.states.get(key)
        if current is None:
            return CoordinatorResult([], StateResult())
        if leader_epoch != -1 and leader_epoch < current.leader_epoch:
            return _refused(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} < {current.leader_epoch}")
        answer = _answer(current)
        if leader_epoch <= current.leader_epoch:
            return CoordinatorResult([], answer)
        update = ShareUpdate(current.snapshot_epoch, leader_epoch, UNINITIALIZED, -1, ())
        if self.updates_since_snapshot.get(key, 0) >= self.snapshot_every:
            snapshot = replace(current, snapshot_epoch=current.snapshot_epoch + 1, leader_epoch=leader_epoch)
            return CoordinatorResult(
                [records.snapshot_record(key, snapshot)],
                replace(answer, leader_epoch=leader_epoch),
                lambda offset: self.replay(key, snapshot, offset),
            )
        return CoordinatorResult(
            [records.update_record(key, update)],
            replace(answer, leader_epoch=leader_epoch),
            lambda offset: self.replay(key, update, offset),
        )

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        current = self.states.get(key)
        if current is None:
            return StateResult()
        if leader_epoch != -1 and leader_epoch < current.leader_epoch:
            return StateResult(ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} < {current.leader_epoch}")
        return replace(_answer(current), batches=[])

    def initialize_state(
        self, key: SharePartitionKey, state_epoch: int, start_offset: int
    ) -> CoordinatorResult[StateResult]:
        current = self.states.get(key)
        if current is not None and state_epoch <= current.state_epoch:
            return _refused(ErrorCode.FENCED_STATE_EPOCH, f"state epoch {state_epoch} <= {current.state_epoch}")
        now = self.clock_ms()
        snapshot = ShareState(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=state_epoch,
            leader_epoch=-1,
            start_offset=start_offset,
            create_timestamp=now,
            write_timestamp=now,
        )
        return CoordinatorResult(
            [records.snapshot_record(key, snapshot)], StateResult(), lambda offset: self.replay(key, snapshot, offset)
        )

    def delete_state(self, key: SharePartitionKey) -> CoordinatorResult[StateResult]:
        if key not in self.states:
            return CoordinatorResult([], StateResult())
        return CoordinatorResult(records.tombstones(key), StateResult(), lambda offset: self.replay(key, None, offset))


def _valid(batch: StateBatch) -> bool:
    return (
        0 <= batch.first_offset <= batch.last_offset
        and batch.delivery_state in records.DELIVERY_STATES
        and batch.delivery_count >= 0
    )


def _answer(state: ShareState) -> StateResult:
    return StateResult(
        state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch,
        start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
        batches=list(state.batches),
    )


def _updated(state: ShareState, update: ShareUpdate) -> ShareState:
    """`state` with `update` applied: start offset (unless -1), leader epoch (unless -1), the
    delivery-complete count (unless -1) and the batches merged."""
    start = update.start_offset if update.start_offset != UNINITIALIZED else state.start_offset
    return replace(
        state,
        leader_epoch=update.leader_epoch if update.leader_epoch != -1 else state.leader_epoch,
        start_offset=start,
        delivery_complete_count=(
            update.delivery_complete_count if update.delivery_complete_count != -1 else state.delivery_complete_count
        ),
        batches=combine(state.batches, update.batches, start) if update.batches else normalize(state.batches, start),
    )
