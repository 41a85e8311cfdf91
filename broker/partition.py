"""One partition replica hosted by this broker (Kafka `Partition`): its role and the state the
controller gave it, its log, and the high watermark.

Terms: AR (assigned replicas), ISR (in-sync replicas), leader epoch, partition epoch (the
zkVersion of the partition state znode), LEO (log end offset), HW (high watermark).

Invariants:
- the HW only moves forward while this replica leads, and never past the leader's LEO; as leader it
  is the minimum LEO over the maximal ISR (followers' LEOs as they last fetched); as follower it is
  min(leader's HW, own LEO);
- the ISR is in one of Kafka's three states (`CommittedIsr`, `PendingExpandIsr`, `PendingShrinkIsr`):
  a change is prepared here, written to ZooKeeper by the replica manager, then committed here
  (`commit_isr_update`) or abandoned (`fail_isr_update`, after which this leader makes no ISR change
  until the controller's next LeaderAndIsr). While a change is in flight no other is prepared.
  acks=-1 counts the committed ISR; the HW counts the maximal one (committed plus joiners), so a
  joiner being written in holds the HW back rather than letting it pass its LEO;
- this object is the only writer of its ISR, HW and (through its log) LEO: the replica fetcher and
  the replica manager call its methods;
- a LeaderAndIsr state applies only with a higher leader epoch than the one held (stale ones are
  refused by the caller);
- leader-only operations on a follower raise NotLeaderOrFollower; a request carrying a leader
  epoch (KIP-320) that differs from ours raises FencedLeaderEpoch (older) or UnknownLeaderEpoch
  (newer); -1 skips the check.

No trio, no sockets: the replica manager wraps this with waiting and timeouts.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from broker.errors import (
    FencedLeaderEpoch,
    NotEnoughReplicas,
    NotLeaderOrFollower,
    OffsetNotAvailable,
    PolicyViolation,
    UnknownLeaderEpoch,
)
from storage.append_origin import AppendOrigin
from storage.errors import InvalidAppendOffset, OffsetOutOfRange
from storage.log import Log, LogAppendInfo, LogReadInfo

NO_EPOCH = -1


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class CommittedIsr:
    """The ISR as stored in the partition state znode."""

    isr: tuple[int, ...]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.isr

    in_flight = False


@dataclass(frozen=True)
class _PendingIsr:
    """An ISR change being written: until it is committed, the committed ISR is what acks count."""

    last_committed: CommittedIsr

    @property
    def isr(self) -> tuple[int, ...]:
        return self.last_committed.isr

    in_flight = True


@dataclass(frozen=True)
class PendingExpandIsr(_PendingIsr):
    """Followers that caught up are being written into the ISR; the HW already counts them."""

    new_in_sync: tuple[int, ...]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.last_committed.isr + self.new_in_sync


@dataclass(frozen=True)
class PendingShrinkIsr(_PendingIsr):
    """Followers that fell behind are being written out of the ISR; until that is committed they
    still count (Kafka's maximal ISR during a shrink is the committed one)."""

    out_of_sync: tuple[int, ...]

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return self.last_committed.isr


IsrState = CommittedIsr | PendingExpandIsr | PendingShrinkIsr


@dataclass
class ReplicaState:
    """A follower as its leader sees it (Kafka `Replica`)."""

    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's LEO when this follower last fetched
    log_start_offset: int = -1  # the follower's log start offset, as its last fetch said (-1: unknown)
    #: while the partition is settled in the follower's fetch session (broker/fetch_sessions.py):
    #: that session's latest fetch time ([ms]), which is this follower's caught-up and fetch time
    clock: list[int] | None = None

    def caught_up_ms(self) -> int:
        """When this follower was last caught up (wall clock, ms): Kafka's lastCaughtUpTimeMs."""
        clock = self.clock
        return self.last_caught_up_ms if clock is None else max(self.last_caught_up_ms, clock[0])


@dataclass
class Partition:
    topic: str
    index: int
    local_broker_id: int
    log: Log
    topic_id: uuid.UUID | None = None
    leader_id: int = -1
    leader_epoch: int = NO_EPOCH
    partition_epoch: int = 0
    controller_epoch: int = 0
    isr_state: IsrState = CommittedIsr(())
    replicas: list[int] = field(default_factory=list)
    high_watermark: int = 0
    remote: dict[int, ReplicaState] = field(default_factory=dict)
    isr_update_failed: bool = False  # a conditional ISR write lost: wait for the controller
    epoch_start_offset: int = 0  # our LEO when this leadership began

    @property
    def isr(self) -> list[int]:
        """The committed ISR (what acks=-1 and min.insync.replicas count)."""
        return list(self.isr_state.isr)

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.index

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # ---- role changes ----------------------------------------------------------------------
    def _apply(self, state) -> None:
        self.leader_id = state["leader"]
        self.leader_epoch = state["leader_epoch"]
        self.partition_epoch = state.get("partition_epoch", state.get("zk_version", 0))
        self.controller_epoch = state["controller_epoch"]
        self.isr_state = CommittedIsr(tuple(state["isr"]))
        self.replicas = list(state["replicas"])

    def make_leader(self, state, checkpointed_hw: int | None = None) -> bool:
        """Become leader with a LeaderAndIsr partition state; returns whether this replica was
        not already leading. Follower LEOs restart unknown (-1) as Kafka does, so the HW cannot
        pass them until they fetch."""
        was_leader = self.is_leader
        if not was_leader:
            hw = self.high_watermark if checkpointed_hw is None else checkpointed_hw
            self.high_watermark = max(self.log.log_start_offset, min(hw, self.log.log_end_offset))
        self._apply(state)
        # A new leader stamps where its epoch starts (KIP-101): followers truncate against it.
        if self.leader_epoch > self.log.epoch_cache.latest_epoch:
            self.log.epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
        self.epoch_start_offset = self.log.log_end_offset
        now = now_ms()
        self.remote = {
            r: self.remote.get(r, ReplicaState(last_caught_up_ms=now))
            if was_leader
            else ReplicaState(last_caught_up_ms=now)
            for r in self.replicas
            if r != self.local_broker_id
        }
        self.isr_update_failed = False
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, state, checkpointed_hw: int | None = None) -> bool:
        """Become a follower; returns whether the leader changed."""
        old_leader = self.leader_id
        if checkpointed_hw is not None:
            self.high_watermark = max(self.log.log_start_offset, min(checkpointed_hw, self.log.log_end_offset))
        self._apply(state)
        self.remote = {}
        return old_leader != self.leader_id

    # ---- checks ------------------------------------------------------------------------------
    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: -1 skips; older raises FencedLeaderEpoch, newer UnknownLeaderEpoch."""
        if current_leader_epoch == NO_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"{self.tp}: epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpoch(f"{self.tp}: epoch {current_leader_epoch} > {self.leader_epoch}")

    def require_leader(self, current_leader_epoch: int = NO_EPOCH) -> None:
        self.check_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollower(f"broker {self.local_broker_id} does not lead {self.tp}")

    # ---- leader operations ---------------------------------------------------------------------
    def append_records_as_leader(
        self,
        records,
        required_acks: int,
        min_insync_replicas: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification: dict | None = None,
    ) -> LogAppendInfo:
        """Append records as the leader from `origin` (CLIENT: a produce request's, validated;
        COORDINATOR: a coordinator's own batches or WriteTxnMarkers' markers). Raises
        NotLeaderOrFollower, NotEnoughReplicas (acks=-1 with |ISR| < min.insync.replicas), and the
        log's CorruptRecordBatch / RecordTooLarge / InvalidProducerEpoch /
        TransactionCoordinatorFenced / InvalidTxnState (`verification`: KIP-890's guards, see
        `Log.append_as_leader`)."""
        self.require_leader()
        if required_acks == -1 and len(self.isr) < min_insync_replicas:
            raise NotEnoughReplicas(
                f"{self.tp}: ISR {self.isr} is smaller than min.insync.replicas {min_insync_replicas}"
            )
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin, verification=verification)
        self.maybe_increment_high_watermark()
        return info

    def append_group_as_leader(
        self, appends: list[tuple[object, int]], min_insync_replicas: int
    ) -> list[LogAppendInfo | Exception]:
        """Several CLIENT appends, `(records, required acks)` in arrival order, written as one
        (`Log.append_group_as_leader`): per append its LogAppendInfo or the exception
        `append_records_as_leader` would have raised for it alone (NotEnoughReplicas for an
        acks=-1 one while |ISR| < min.insync.replicas). Raises NotLeaderOrFollower for all."""
        self.require_leader()
        short = len(self.isr) < min_insync_replicas
        outcomes: list = [None] * len(appends)
        written = []
        for index, (_, acks) in enumerate(appends):
            if short and acks == -1:
                outcomes[index] = NotEnoughReplicas(
                    f"{self.tp}: ISR {self.isr} is smaller than min.insync.replicas {min_insync_replicas}"
                )
            else:
                written.append(index)
        if written:
            infos = self.log.append_group_as_leader([appends[i][0] for i in written], self.leader_epoch)
            for index, info in zip(written, infos):
                outcomes[index] = info
            self.maybe_increment_high_watermark()
        return outcomes

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR (the leader's own included); forward only. Returns whether
        it moved."""
        if self.leader_id != self.local_broker_id:
            return False
        new_hw = self.log.log_end_offset
        remote = self.remote
        for r in self.isr_state.maximal_isr:
            state = remote.get(r)
            if state is not None and r != self.local_broker_id and state.log_end_offset < new_hw:
                new_hw = state.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    @property
    def last_stable_offset(self) -> int:
        """The LSO (KIP-98): the first offset of the oldest transaction not yet decided and
        replicated, never above the HW; read_committed consumers read below it."""
        return self.log.last_stable_offset(self.high_watermark)

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        committed_only: bool,
        min_one_batch: bool,
        current_leader_epoch: int = NO_EPOCH,
        read_committed: bool = False,
        leader_only: bool = True,
    ) -> LogReadInfo:
        """Read for a consumer (committed_only: up to the HW, or with `read_committed` up to the
        LSO) or a follower (to the LEO). `leader_only=False` (a consumer's Fetch v11+, KIP-392)
        lets a follower replica answer a consumer up to its own HW. Raises NotLeaderOrFollower,
        fencing errors, OffsetOutOfRange."""
        if leader_only or self.is_leader:
            self.require_leader(current_leader_epoch)
            if committed_only:
                self._require_caught_up_high_watermark()
        else:
            self.check_leader_epoch(current_leader_epoch)
            if self.leader_id < 0 or not self.replicas:
                raise NotLeaderOrFollower(f"broker {self.local_broker_id} has no replica state for {self.tp}")
        end = (self.last_stable_offset if read_committed else self.high_watermark) if committed_only else None
        return self.log.read(fetch_offset, max_bytes, end, min_one_batch=min_one_batch)

    def _require_caught_up_high_watermark(self) -> None:
        """A new leader may know a lower HW than its predecessor told consumers; until its HW
        reaches the start of its epoch, consumers get OFFSET_NOT_AVAILABLE (retriable, as Kafka's
        KIP-207) instead of a high watermark that went backwards."""
        if self.high_watermark < self.epoch_start_offset:
            raise OffsetNotAvailable(
                f"{self.tp}: HW {self.high_watermark} is below the epoch start {self.epoch_start_offset}"
            )

    def check_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        """A follower Fetch is believed only from an assigned replica other than this one
        (NotLeaderOrFollower otherwise, as Kafka's followerReplicaOrThrow) and only at an offset
        this leader has (OffsetOutOfRange above its LEO, so a forged offset never moves the HW)."""
        if replica_id == self.local_broker_id or replica_id not in self.replicas:
            raise NotLeaderOrFollower(f"fetch for {self.tp} from broker {replica_id}, which is not a follower replica")
        if fetch_offset > self.log.log_end_offset:
            raise OffsetOutOfRange(
                f"follower {replica_id} fetched {self.tp} at {fetch_offset}, above the leader's LEO {self.log.log_end_offset}"
            )

    def update_follower_log_start(self, replica_id: int, log_start_offset: int) -> bool:
        """A follower's fetch reported its log start offset (Fetch v5+); returns whether it moved."""
        state = self.remote.get(replica_id)
        if state is None or log_start_offset < 0 or log_start_offset == state.log_start_offset:
            return False
        state.log_start_offset = log_start_offset
        return True

    def low_watermark(self) -> int:
        """The smallest log start offset over this leader and its in-sync followers that reported
        one (Kafka's `lowWatermarkIfLeader`): what DeleteRecords answers and waits for."""
        starts = [self.log.log_start_offset]
        starts += [s.log_start_offset for r, s in self.remote.items() if r in self.isr and s.log_start_offset >= 0]
        return min(starts)

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords (API 21): raise the log start offset to `offset` (-1: the high watermark);
        returns the offset requested. Raises NotLeaderOrFollower, PolicyViolation for a compact-only
        topic, OffsetOutOfRange for an offset beyond the high watermark or below -1."""
        self.require_leader()
        if "delete" not in self.log.config.cleanup_policy:
            raise PolicyViolation(
                f"Records of partition {self.topic}-{self.index} can not be deleted due to the configured policy"
            )
        requested = self.high_watermark if offset == -1 else offset
        if requested < 0 or requested > self.high_watermark:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {requested} of partition {self.topic}-{self.index} "
                f"since it is larger than the high watermark {self.high_watermark}"
            )
        self.log.maybe_increment_log_start_offset(requested)
        return requested

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now: int | None = None) -> bool:
        """A follower fetched at `fetch_offset` (its LEO); returns whether the HW moved.

        Kafka's caught-up rule: the follower is caught up now if it reached our LEO, and was
        caught up at its previous fetch if it has now reached the LEO we had then."""
        state = self.remote.get(replica_id)
        if state is None:
            return False
        now = now_ms() if now is None else now
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        moved = fetch_offset != state.log_end_offset
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_leo = leo
        state.last_fetch_ms = now
        # HW = min LEO over the ISR: only this follower's LEO changed here, so only then can it move
        return moved and self.maybe_increment_high_watermark()

    def record_caught_up_fetch(self, replica_id: int, fetch_offset: int, log_start_offset: int, now: int) -> bool:
        """Kafka's updateFollowerFetchState for an idle partition, in one step: an in-sync
        follower fetching at our LEO, which was already its LEO, with its log start offset (-1:
        not reported) unchanged. Records the fetch (caught up at `now`, ms) and returns True:
        nothing else follows from such a fetch (the HW, the low watermark and the ISR stay as
        they are). Returns False, recording nothing, in every other case, where
        `update_follower_fetch` and the log start and ISR checks apply."""
        state = self.remote.get(replica_id)
        if (
            state is None
            or fetch_offset != state.log_end_offset
            or fetch_offset != self.log.log_end_offset
            or (log_start_offset >= 0 and log_start_offset != state.log_start_offset)
            or replica_id not in self.isr_state.isr
        ):
            return False
        state.last_caught_up_ms = state.last_fetch_ms = now
        state.last_fetch_leader_leo = fetch_offset
        return True

    def out_of_sync_replicas(self, max_lag_ms: int, now: int | None = None) -> list[int]:
        """ISR followers not caught up within `replica.lag.time.max.ms` (to shrink away)."""
        now = now_ms() if now is None else now
        return [
            r
            for r in self.isr
            if r != self.local_broker_id and r in self.remote and now - self.remote[r].caught_up_ms() > max_lag_ms
        ]

    def should_expand_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR that reached the HW and the current epoch's start offset."""
        state = self.remote.get(replica_id)
        if state is None or replica_id in self.isr or not self.is_leader:
            return False
        epoch_start = next((o for e, o in self.log.epoch_cache.entries if e == self.leader_epoch), 0)
        return state.log_end_offset >= self.high_watermark and state.log_end_offset >= epoch_start

    # ---- ISR changes (written to ZooKeeper by the replica manager) --------------------------------
    @property
    def can_change_isr(self) -> bool:
        """A leader with no ISR change in flight and no lost ISR write waiting for the controller."""
        return self.is_leader and not self.isr_state.in_flight and not self.isr_update_failed

    def prepare_isr_shrink(self, out_of_sync: list[int]) -> list[int]:
        """Enter PendingShrinkIsr; returns the ISR to write (the committed one less `out_of_sync`)."""
        committed = CommittedIsr(self.isr_state.isr)
        self.isr_state = PendingShrinkIsr(committed, out_of_sync=tuple(out_of_sync))
        return [r for r in committed.isr if r not in out_of_sync]

    def prepare_isr_expand(self, joiners: list[int]) -> list[int]:
        """Enter PendingExpandIsr; returns the ISR to write (the committed one plus `joiners`)."""
        committed = CommittedIsr(self.isr_state.isr)
        self.isr_state = PendingExpandIsr(committed, new_in_sync=tuple(joiners))
        return list(committed.isr) + list(joiners)

    def commit_isr_update(self, new_isr: list[int], partition_epoch: int) -> bool:
        """The write of `new_isr` succeeded with the znode's new zkVersion; returns whether the HW
        moved."""
        self.isr_state = CommittedIsr(tuple(new_isr))
        self.partition_epoch = partition_epoch
        return self.maybe_increment_high_watermark()

    def fail_isr_update(self) -> None:
        """The write lost its conditional update: this broker's view is stale, so it keeps the
        committed ISR and changes nothing more until the controller's next LeaderAndIsr."""
        self.isr_state = CommittedIsr(self.isr_state.isr)
        self.isr_update_failed = True

    # ---- follower operations -------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """KIP-101 truncation of this follower's log to `offset` (its HW follows)."""
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """This follower's LEO fell below the leader's log start offset: drop everything and
        continue at `offset`."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def append_records_as_follower(self, records, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """Append what the leader returned (batches as it stored them), then follow its log start
        offset and take HW = min(leader's HW, own LEO). Raises the log's errors (StorageError,
        ProtocolError) with nothing changed but what was appended."""
        if records:
            try:
                self.log.append_as_follower(records)
            except InvalidAppendOffset as e:
                # Kafka's recovery: an empty log started at the leader's log start offset, which
                # DeleteRecords put inside a batch; the leader sends that whole batch. Start the
                # log at the batch instead (the leader's log start offset is taken just below).
                leo = self.log.log_end_offset
                first, last = e.first_offset, e.last_offset
                if leo != self.log.log_start_offset or first is None or last is None or not first < leo <= last:
                    raise
                self.log.truncate_fully_and_start_at(first)
                self.log.append_as_follower(records)
        if leader_log_start_offset > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(leader_log_start_offset)
        self.high_watermark = min(leader_high_watermark, self.log.log_end_offset)

    def offset_for_timestamp(
        self,
        timestamp: int,
        *,
        committed_only: bool,
        current_leader_epoch: int = NO_EPOCH,
        read_committed: bool = False,
    ) -> tuple[int, int, int]:
        """ListOffsets: (timestamp, offset, leader epoch of that offset); -1 timestamp = latest
        (the HW, or the LSO for `read_committed`),
        -2 = earliest, -3 = the record with the max timestamp (KIP-734). A lookup by time that
        finds nothing below the fetchable end returns (-1, -1, -1)."""
        self.require_leader(current_leader_epoch)
        if committed_only:
            self._require_caught_up_high_watermark()
        end = self.high_watermark if committed_only else self.log.log_end_offset
        if committed_only and read_committed:
            end = self.last_stable_offset
        if timestamp == -2:
            offset = self.log.log_start_offset
            return -1, offset, self.log.epoch_cache.epoch_for_offset(offset)
        if timestamp == -1:
            return -1, end, self.log.epoch_cache.epoch_for_offset(end - 1) if end > 0 else self.leader_epoch
        if timestamp == -3:
            found = self.log.max_timestamp_and_offset()
        else:
            found = self.log.fetch_offset_by_timestamp(timestamp)
        if found is None or found[0] >= end:
            return -1, -1, -1
        offset, ts = found
        return ts, offset, self.log.epoch_cache.epoch_for_offset(offset)
