"""One share-partition's in-flight records on its leader (Kafka's `SharePartition`, KIP-932), as
pure state: no log, no clock of its own (callers pass `now_ms`, monotonic).

- The share-partition start offset (SPSO, `start_offset`) is the first record not yet
  acknowledged or archived; the end offset (SPEO, `end_offset`) is one past the last record ever
  acquired. Between them each record has a state: Available, Acquired (by one member, until its
  lock deadline), Acknowledged or Archived, and a delivery count.
- `acquire` hands a member Available records and new ones past the SPEO, one delivery more each,
  for `group.share.record.lock.duration.ms`, whole batches until `max_records` is reached (a
  soft limit, as ShareFetch's MaxRecords) and never more than
  `group.share.partition.max.record.locks` in flight. Control batches are archived, never handed out.
- `acknowledge`: ACCEPT (1) acknowledges, RELEASE (2) makes a record Available again, REJECT (3)
  and GAP (0) archive it. Only the member holding a record may acknowledge it
  (INVALID_RECORD_STATE otherwise). A record released or timed out at the delivery count limit
  is archived.
- `expire_locks` makes records whose lock ran out Available (or Archived at the limit);
  `release_member` does the same for everything a member holds (its session ended).
- The SPSO moves past records that are done; their state is then forgotten.

The records between the SPSO and the SPEO are kept as runs (Kafka's in-flight batches): offsets
first..last sharing a state, a delivery count, a holder and a lock deadline, split only where an
acquisition or acknowledgement covers part of a run, and joined again when neighbours agree. Every
operation costs O(runs + log n), not O(records): a member acquiring and accepting whole fetches
keeps a handful of runs whatever the number of records.
"""

from __future__ import annotations

import bisect
import enum
import math
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


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(slots=True)
class InFlight:
    """One record's state (what `records()` shows)."""

    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: float = 0.0


@dataclass(slots=True)
class Run:
    """Offsets first..last (inclusive) in one state, delivered `delivery_count` times, held by
    `member_id` until `lock_deadline_ms` while Acquired."""

    first: int
    last: int
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: float = 0.0
    #: an acknowledgement not yet durable (its token): `state` is what it made of the records,
    #: `before` the holder and lock deadline they go back to if its write fails
    pending: object | None = None
    before: tuple[str | None, float] | None = None

    def same(self, other: Run) -> bool:
        return (
            self.state == other.state
            and self.delivery_count == other.delivery_count
            and self.member_id == other.member_id
            and self.lock_deadline_ms == other.lock_deadline_ms
            and self.pending is other.pending
            and self.before == other.before
        )

    def copy(self, first: int, last: int) -> Run:
        return Run(
            first,
            last,
            self.state,
            self.delivery_count,
            self.member_id,
            self.lock_deadline_ms,
            self.pending,
            self.before,
        )

    @property
    def acquirable(self) -> bool:
        return self.state == RecordState.AVAILABLE and self.pending is None

    @property
    def done(self) -> bool:
        return self.state in DONE and self.pending is None

    @property
    def size(self) -> int:
        return self.last - self.first + 1


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


def _first(run: Run) -> int:
    return run.first


class SharePartition:
    def __init__(self, start_offset: int, *, lock_duration_ms: int, delivery_limit: int, max_in_flight: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.lock_duration_ms = lock_duration_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        #: the runs between the SPSO and the SPEO, in offset order, never overlapping (offsets in
        #: no run are done: gaps between batches, below the SPSO)
        self.runs: list[Run] = []
        self.acquired_count = 0  # records Acquired now (the record-lock cap counts them)
        self._next_expiry = math.inf  # no Acquired run's lock runs out before this (ms)
        self.leader_epoch = -1  # the partition's, when the state was read (fences older leaders' writes)
        self.state_epoch = 0  # the share coordinator's, as read
        self.dirty = False  # changed since the last durable write (released or timed-out locks)

    def records(self) -> dict[int, InFlight]:
        """Each in-flight offset's state (O(records): for tests and views, not the hot path)."""
        return {
            o: InFlight(r.state, r.delivery_count, r.member_id, r.lock_deadline_ms)
            for r in self.runs
            for o in range(r.first, r.last + 1)
        }

    # ---- durable state (the share coordinator's view, KIP-932) ------------------------------------
    def restore(self, batches: Iterable[tuple[int, int, int, int]], log_end_offset: int) -> None:
        """Install persisted state batches (first offset, last offset, delivery state, delivery
        count) at or past the SPSO and below `log_end_offset` (no record exists past it):
        Available, Acknowledged or Archived, with their delivery counts (a record acquired when
        the state was written comes back Available)."""
        for first, last, state, count in sorted(batches):
            lo, hi = max(first, self.start_offset, self.end_offset), min(last, log_end_offset - 1)
            if lo > hi:
                continue
            kept = RecordState.AVAILABLE if state == RecordState.ACQUIRED else RecordState(state)
            self._append(Run(lo, hi, kept, count))
            self.end_offset = hi + 1
        self._advance()

    def persisted(self, include: object | None = None) -> tuple[int, list[tuple[int, int, int, int]], int]:
        """(SPSO, state batches, delivery-complete count) as the share coordinator stores them:
        runs of records with one state and delivery count; an Acquired record is written
        Available (its lock does not survive the leader), and so is a record whose
        acknowledgement is not durable yet, unless it is `include`'s (the write that makes it so)."""
        out: list[list[int]] = []
        done = 0
        # the SPSO as it is once this write is durable: past `include`'s accepted records too
        start = next(
            (
                r.first
                for r in self.runs
                if not (r.done or (include is not None and r.pending is include and r.state in DONE))
            ),
            max(self.start_offset, self.end_offset),
        )
        for run in self.runs:
            if run.last < start:
                continue
            state = RecordState.AVAILABLE if run.state == RecordState.ACQUIRED else run.state
            if run.pending is not None and run.pending is not include:
                state = RecordState.AVAILABLE
            if state != RecordState.AVAILABLE:
                done += run.size
            last = out[-1] if out else None
            if last is not None and last[1] == run.first - 1 and last[2:] == [state, run.delivery_count]:
                last[1] = run.last
            else:
                out.append([run.first, run.last, int(state), run.delivery_count])
        return start, [(a, b, c, d) for a, b, c, d in out], done

    # ---- reading ---------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a read for acquisition starts: the first Available record, else the SPEO."""
        return next((r.first for r in self.runs if r.acquirable), self.end_offset)

    def acquirable(self) -> bool:
        """Whether a member could be given anything now (an Available record, or room past the
        SPEO); the log decides whether new records exist."""
        return self._room() > 0 or any(r.acquirable for r in self.runs)

    def _room(self) -> int:
        return self.max_in_flight - self.acquired_count

    def acquire(self, member_id: str, batches: Iterable[Batch], max_records: int, now_ms: float) -> list[AcquiredRange]:
        """Acquire for `member_id` from `batches` (read from the log at `next_fetch_offset`, in
        order): -> the ranges acquired, in offset order. `max_records` is ShareFetch's soft
        limit: a batch begun is acquired whole ("exceeded for alignment of batch boundaries");
        the record-lock cap is never exceeded."""
        acquired: list[AcquiredRange] = []
        wanted, room = max_records, self._room()
        deadline = now_ms + self.lock_duration_ms
        self._next_expiry = min(self._next_expiry, deadline)
        for batch in batches:
            if wanted <= 0 or room <= 0:
                break
            lo, hi = max(batch.base_offset, self.start_offset), batch.last_offset
            if lo > hi:
                continue
            if batch.is_control:
                if hi >= self.end_offset:
                    self._append(Run(max(lo, self.end_offset), hi, RecordState.ARCHIVED))
                    self.end_offset = hi + 1
                continue
            taken = 0
            if lo < self.end_offset:  # released or timed-out records of this batch
                taken = self._take_available(member_id, lo, min(hi, self.end_offset - 1), room, deadline, acquired)
            if room - taken > 0 and hi >= self.end_offset:  # records never delivered
                first = max(lo, self.end_offset)
                last = min(hi, first + room - taken - 1)
                self._append(Run(first, last, RecordState.ACQUIRED, 1, member_id, deadline))
                self.end_offset = last + 1
                self.acquired_count += last - first + 1
                taken += last - first + 1
                _extend(acquired, first, last, 1)
            wanted -= taken
            room -= taken
        self._advance()
        return acquired

    def _take_available(
        self, member_id: str, lo: int, hi: int, budget: int, deadline: float, acquired: list[AcquiredRange]
    ) -> int:
        """Acquire the Available records in lo..hi (at most `budget`); -> how many."""
        taken = 0
        i = self._index(lo)
        while i < len(self.runs) and taken < budget:
            run = self.runs[i]
            if run.first > hi:
                break
            if not run.acquirable or run.last < lo:
                i += 1
                continue
            first = max(run.first, lo)
            last = min(run.last, hi, first + budget - taken - 1)
            i = self._split(i, first, last)
            part = self.runs[i]
            part.state, part.delivery_count = RecordState.ACQUIRED, part.delivery_count + 1
            part.member_id, part.lock_deadline_ms = member_id, deadline
            self.acquired_count += part.size
            taken += part.size
            _extend(acquired, part.first, part.last, part.delivery_count)
            i += 1
        return taken

    # ---- acknowledging -------------------------------------------------------------------------------
    def acknowledge(
        self, member_id: str, first_offset: int, last_offset: int, types: list[int], token: object | None = None
    ) -> ErrorCode:
        """One AcknowledgementBatch: `types` has one type for the whole range or one per offset.
        INVALID_REQUEST for a malformed batch; INVALID_RECORD_STATE when a record of the range is
        not acquired by this member (nothing of the batch is applied then). With a `token` the
        acknowledgement is pending until `commit(token)` (its write is durable) or
        `rollback(token)` (it failed: the member holds the records again): meanwhile a released
        record is not handed out and the SPSO does not pass an accepted one."""
        count = last_offset - first_offset + 1
        if count <= 0 or len(types) not in (1, count) or any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
            return ErrorCode.INVALID_REQUEST
        if not self._held_by(member_id, first_offset, last_offset):
            return ErrorCode.INVALID_RECORD_STATE
        if len(types) == 1 or len(set(types)) == 1:
            self._settle(first_offset, last_offset, types[0], token)
        else:
            start = first_offset
            for i in range(1, count + 1):  # runs of one type, each settled at once
                if i == count or types[i] != types[i - 1]:
                    self._settle(start, first_offset + i - 1, types[i - 1], token)
                    start = first_offset + i
        self._advance()
        return ErrorCode.NONE

    def commit(self, token: object) -> None:
        """The acknowledgements of `token` are durable: they take effect for good."""
        for run in self.runs:
            if run.pending is token:
                run.pending = run.before = None
        self._coalesce(0, len(self.runs))
        self._advance()

    def rollback(self, token: object) -> None:
        """The acknowledgements of `token` were not made durable: their records are Acquired by
        their member again until the lock they had runs out (their delivery counts unchanged)."""
        undone = False
        for run in self.runs:
            if run.pending is token and run.before is not None:
                run.member_id, run.lock_deadline_ms = run.before
                run.state, run.pending, run.before = RecordState.ACQUIRED, None, None
                self.acquired_count += run.size
                self._next_expiry = min(self._next_expiry, run.lock_deadline_ms)
                undone = True
        if undone:
            self._coalesce(0, len(self.runs))
            self.dirty = True

    def _held_by(self, member_id: str, lo: int, hi: int) -> bool:
        """Whether every offset of lo..hi is in a run Acquired by `member_id` (no gap)."""
        expected = lo
        for i in range(self._index(lo), len(self.runs)):
            run = self.runs[i]
            if run.first > expected:
                return False
            if run.state != RecordState.ACQUIRED or run.member_id != member_id:
                return False
            expected = run.last + 1
            if expected > hi:
                return True
        return False

    def _settle(self, lo: int, hi: int, kind: int, token: object | None) -> None:
        """Apply one acknowledgement type to lo..hi (all Acquired by the member)."""
        i = self._index(lo)
        while i < len(self.runs) and self.runs[i].first <= hi:
            run = self.runs[i]
            i = self._split(i, max(run.first, lo), min(run.last, hi))
            part = self.runs[i]
            if token is not None:
                part.pending, part.before = token, (part.member_id, part.lock_deadline_ms)
            if kind == ACCEPT:
                self._finish(part, RecordState.ACKNOWLEDGED)
            elif kind == RELEASE:
                self._release(part)
            else:
                self._finish(part, RecordState.ARCHIVED)
            i += 1
        self._coalesce(self._index(lo) - 1, i + 1)

    def expire_locks(self, now_ms: float) -> int:
        """Records whose lock ran out become Available (Archived at the limit); -> how many."""
        if not self.acquired_count or now_ms < self._next_expiry:
            return 0
        expired = 0
        self._next_expiry = math.inf
        for run in self.runs:
            if run.state != RecordState.ACQUIRED:
                continue
            if run.lock_deadline_ms <= now_ms:
                expired += run.size
                self._release(run)
            else:
                self._next_expiry = min(self._next_expiry, run.lock_deadline_ms)
        if expired:
            self._coalesce(0, len(self.runs))
            self._advance()
            self.dirty = True
        return expired

    def release_member(self, member_id: str) -> int:
        """Everything `member_id` holds becomes Available (its session ended); -> how many."""
        held = 0
        for run in self.runs:
            if run.state == RecordState.ACQUIRED and run.member_id == member_id:
                held += run.size
                self._release(run)
        if held:
            self._coalesce(0, len(self.runs))
            self._advance()
            self.dirty = True
        return held

    # ---- internals ---------------------------------------------------------------------------------
    def _release(self, run: Run) -> None:
        self._finish(run, RecordState.ARCHIVED if run.delivery_count >= self.delivery_limit else RecordState.AVAILABLE)

    def _finish(self, run: Run, state: RecordState) -> None:
        if run.state == RecordState.ACQUIRED:
            self.acquired_count -= run.size
        run.state, run.member_id, run.lock_deadline_ms = state, None, 0.0

    def _index(self, offset: int) -> int:
        """The index of the run holding `offset`, or of the first run after it."""
        i = bisect.bisect_right(self.runs, offset, key=_first) - 1
        return i if i >= 0 and self.runs[i].last >= offset else i + 1

    def _split(self, i: int, first: int, last: int) -> int:
        """Cut run i so first..last (inside it) is a run of its own; -> that run's index."""
        run = self.runs[i]
        if run.last > last:
            self.runs.insert(i + 1, run.copy(last + 1, run.last))
            run.last = last
        if run.first < first:
            self.runs.insert(i + 1, run.copy(first, run.last))
            run.last = first - 1
            return i + 1
        return i

    def _append(self, run: Run) -> None:
        """Add a run past every other one (joined to the last when they agree)."""
        last = self.runs[-1] if self.runs else None
        if last is not None and last.last == run.first - 1 and last.same(run):
            last.last = run.last
        else:
            self.runs.append(run)

    def _coalesce(self, lo: int, hi: int) -> None:
        """Join adjacent runs that agree: each pair (i, i + 1) for lo <= i < hi (clipped)."""
        i = max(lo, 0)
        end = min(hi, len(self.runs) - 1)
        while i < end:
            a, b = self.runs[i], self.runs[i + 1]
            if a.last == b.first - 1 and a.same(b):
                a.last = b.last
                del self.runs[i + 1]
                end -= 1
            else:
                i += 1

    def _advance(self) -> None:
        """Move the SPSO past records that are done, and forget them."""
        k = 0
        while k < len(self.runs) and self.runs[k].done:
            k += 1
        if k:
            del self.runs[:k]
        self.start_offset = self.runs[0].first if self.runs else max(self.start_offset, self.end_offset)


def _extend(ranges: list[AcquiredRange], first: int, last: int, delivery_count: int) -> None:
    if ranges and ranges[-1].last_offset == first - 1 and ranges[-1].delivery_count == delivery_count:
        ranges[-1] = ranges[-1]._replace(last_offset=last)
    else:
        ranges.append(AcquiredRange(first, last, delivery_count))
