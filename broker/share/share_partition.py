"""One share-partition's in-flight records on its leader (Kafka's `SharePartition`, KIP-932), as
pure state: no log, no clock of its own (callers pass `now_ms`, monotonic).

- The share-partition start offset (SPSO, `start_offset`) is the first record not yet
  acknowledged or archived; the end offset (SPEO, `end_offset`) is one past the last record ever
  acquired. Between them each record has a state: Available, Acquired (by one member, until its
  lock deadline), Acknowledged or Archived, and a delivery count.
- `acquire` hands a member Available records and new ones past the SPEO, one delivery more each,
  for `group.share.record.lock.duration.ms`, no more than `max_records` and never more than
  `group.share.partition.max.record.locks` in flight. Control batches are archived, never handed out.
- `acknowledge`: ACCEPT (1) acknowledges, RELEASE (2) makes a record Available again, REJECT (3)
  and GAP (0) archive it. Only the member holding a record may acknowledge it
  (INVALID_RECORD_STATE otherwise). A record released or timed out at the delivery count limit
  is archived.
- `expire_locks` makes records whose lock ran out Available (or Archived at the limit);
  `release_member` does the same for everything a member holds (its session ended).
- The SPSO moves past records that are done; their state is then forgotten.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import ErrorCode

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3


class RecordState(enum.IntEnum):
    """Kafka's `RecordState` values (as persisted in share state)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: float = 0.0


class AcquiredRange(NamedTuple):
    """ShareFetch's `AcquiredRecords`: offsets first..last (inclusive), delivered that often."""

    first_offset: int
    last_offset: int
    delivery_count: int


class Batch(NamedTuple):
    """What acquisition needs of a log batch: its offsets and whether it is a control batch."""

    base_offset: int
    last_offset: int
    is_control: bool


class SharePartition:
    def __init__(self, start_offset: int, *, lock_duration_ms: int, delivery_limit: int, max_in_flight: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.in_flight: dict[int, InFlight] = {}
        self.leader_epoch = -1  # the partition's, when the state was read (fences older leaders' writes)
        self.state_epoch = 0  # the share coordinator's, as read
        self.dirty = False  # changed since the last durable write (released or timed-out locks)

    # ---- durable state (the share coordinator's view, KIP-932) ------------------------------------
    def restore(self, batches: Iterable[tuple[int, int, int, int]], log_end_offset: int) -> None:
        """Install persisted state batches (first offset, last offset, delivery state, delivery
        count) at or past the SPSO and below `log_end_offset` (no record exists past it):
        Available, Acknowledged or Archived, with their delivery counts (a record acquired when
        the state was written comes back Available)."""
        for first, last, state, count in batches:
            for offset in range(max(first, self.start_offset), min(last + 1, log_end_offset)):
                self.in_flight[offset] = InFlight(RecordState(state), count)
                self.end_offset = max(self.end_offset, offset + 1)
        self._advance()

    def persisted(self) -> tuple[int, list[tuple[int, int, int, int]], int]:
        """(SPSO, state batches, delivery-complete count) as the share coordinator stores them:
        runs of records with one state and delivery count; an Acquired record is written
        Available (its lock does not survive the leader)."""
        runs: list[list[int]] = []
        done = 0
        for offset in sorted(self.in_flight):
            record = self.in_flight[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            if state != RecordState.AVAILABLE:
                done += 1
            if runs and runs[-1][1] == offset - 1 and runs[-1][2:] == [state, record.delivery_count]:
                runs[-1][1] = offset
            else:
                runs.append([offset, offset, int(state), record.delivery_count])
        return self.start_offset, [(a, b, c, d) for a, b, c, d in runs], done

    # ---- reading ---------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a read for acquisition starts: the first Available record, else the SPEO."""
        available = [o for o, r in self.in_flight.items() if r.state == RecordState.AVAILABLE]
        return min(available) if available else self.end_offset

    def acquirable(self) -> bool:
        """Whether a member could be given anything now (an Available record, or room past the
        SPEO); the log decides whether new records exist."""
        return any(r.state == RecordState.AVAILABLE for r in self.in_flight.values()) or self._room() > 0

    def _room(self) -> int:
        held = sum(1 for r in self.in_flight.values() if r.state == RecordState.ACQUIRED)
        return self.max_in_flight - held

    def acquire(self, member_id: str, batches: Iterable[Batch], max_records: int, now_ms: float) -> list[AcquiredRange]:
        """Acquire for `member_id` from `batches` (read from the log at `next_fetch_offset`, in
        order): -> the ranges acquired, in offset order."""
        acquired: list[AcquiredRange] = []
        budget = min(max_records, self._room())
        deadline = now_ms + self.lock_duration_ms
        for batch in batches:
            if budget <= 0:
                break
            for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                record = self.in_flight.get(offset)
                if batch.is_control:
                    if record is None and offset >= self.end_offset:
                        self.in_flight[offset] = InFlight(RecordState.ARCHIVED)
                        self.end_offset = offset + 1
                    continue
                if record is None:
                    if offset < self.end_offset:
                        continue  # done before and forgotten (below the SPSO only), or skipped
                    record = self.in_flight[offset] = InFlight(RecordState.AVAILABLE)
                    self.end_offset = offset + 1
                elif record.state != RecordState.AVAILABLE:
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline_ms = deadline
                _extend(acquired, offset, record.delivery_count)
                budget -= 1
                if budget <= 0:
                    break
        self._advance()
        return acquired

    # ---- acknowledging -------------------------------------------------------------------------------
    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, types: list[int]) -> ErrorCode:
        """One AcknowledgementBatch: `types` has one type for the whole range or one per offset.
        INVALID_REQUEST for a malformed batch; INVALID_RECORD_STATE when a record of the range is
        not acquired by this member (nothing of the batch is applied then)."""
        count = last_offset - first_offset + 1
        if count <= 0 or len(types) not in (1, count) or any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
            return ErrorCode.INVALID_REQUEST
        if count > len(self.in_flight):  # cannot all be acquired: refused before walking the range
            return ErrorCode.INVALID_RECORD_STATE
        offsets = range(first_offset, last_offset + 1)
        for offset in offsets:
            record = self.in_flight.get(offset)
            if record is None or record.state != RecordState.ACQUIRED or record.member_id != member_id:
                return ErrorCode.INVALID_RECORD_STATE
        for i, offset in enumerate(offsets):
            kind = types[0] if len(types) == 1 else types[i]
            record = self.in_flight[offset]
            if kind == ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif kind == RELEASE:
                self._release(record)
            else:
                self._finish(record, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.NONE

    def expire_locks(self, now_ms: float) -> int:
        """Records whose lock ran out become Available (Archived at the limit); -> how many."""
        expired = [
            r for r in self.in_flight.values() if r.state == RecordState.ACQUIRED and r.lock_deadline_ms <= now_ms
        ]
        for record in expired:
            self._release(record)
        self._advance()
        self.dirty = self.dirty or bool(expired)
        return len(expired)

    def release_member(self, member_id: str) -> int:
        """Everything `member_id` holds becomes Available (its session ended); -> how many."""
        held = [r for r in self.in_flight.values() if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for record in held:
            self._release(record)
        self._advance()
        self.dirty = self.dirty or bool(held)
        return len(held)

    # ---- internals ---------------------------------------------------------------------------------
    def _release(self, record: InFlight) -> None:
        if record.delivery_count >= self.delivery_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            self._finish(record, RecordState.AVAILABLE)

    @staticmethod
    def _finish(record: InFlight, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0.0

    def _advance(self) -> None:
        """Move the SPSO past records that are done, and forget them."""
        while self.start_offset < self.end_offset:
            record = self.in_flight.get(self.start_offset)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self.in_flight.pop(self.start_offset, None)
            self.start_offset += 1


def _extend(ranges: list[AcquiredRange], offset: int, delivery_count: int) -> None:
    if ranges and ranges[-1].last_offset == offset - 1 and ranges[-1].delivery_count == delivery_count:
        ranges[-1] = ranges[-1]._replace(last_offset=offset)
    else:
        ranges.append(AcquiredRange(offset, offset, delivery_count))
