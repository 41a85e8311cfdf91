"""What both coordinators share (Kafka's `CoordinatorRuntime`): the partitions of one internal
topic (`__consumer_offsets`, `__transaction_state`) this broker leads, their load on election
and unload on resignation, the replay of a partition's log, the one write path of both
coordinators (`write`: an operation's `CoordinatorResult` appended through the broker's append
path with acks=-1 and origin COORDINATOR, and applied only once committed; writes of one key can
take turns, `one_at_a_time`), and the one timer (`every`).

A coordinator owns a `CoordinatorRuntime` and gives it two callbacks: `load(partition, token)`
(replay the partition with `replay`, then install what it found if `is_current(partition,
token)`) and `unloaded(partition)` (drop the partition's state). The broker gives the runtime a
`PartitionLog` (the replica manager seen through `broker.coordinator_log`): the coordinator
packages import no broker code.

Ownership: `owned` maps a partition to the leader epoch it is (being) loaded in, which the
transaction coordinator uses as its coordinator epoch; `loading` holds those still replaying
(their keys answer COORDINATOR_LOAD_IN_PROGRESS); a partition not owned answers
NOT_COORDINATOR. A load is identified by a token: a resignation (or a reload) makes the token
stale, and a stale load installs nothing.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

import trio

from protocol.errors import ErrorCode, KafkaError
from protocol.record_batch import build_batch, iter_batches
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)

#: one coordinator record: (key, value), value None for a tombstone
Record = tuple[bytes, bytes | None]
R = TypeVar("R")


class AppendOutcome(NamedTuple):
    """One coordinator append's outcome: NONE and the first offset written, or the append
    path's error code (-1) with its message."""

    error: ErrorCode
    first_offset: int
    message: str | None


class LogRead(Protocol):
    """Whole batches read from a log, and the offset after the last of them."""

    @property
    def records(self) -> bytes: ...

    @property
    def next_offset(self) -> int: ...


class ReplicaLog(Protocol):
    """The part of a partition's log a replay reads (storage.log.Log)."""

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def read(self, offset: int, max_bytes: int) -> LogRead: ...


class PartitionLog(Protocol):
    """What a coordinator needs of the broker (Kafka's `PartitionWriter`, plus the log a load
    replays): `append` writes whole v2 batches with acks=-1 and returns once the HW covers them
    or the append failed; `log` is the local log of a partition this broker hosts (raises the
    broker's error for one it does not)."""

    async def append(self, tp: TopicPartition, records: bytes, timeout_ms: int) -> AppendOutcome: ...

    def log(self, tp: TopicPartition) -> ReplicaLog: ...

    async def delete_below(self, tp: TopicPartition, offset: int) -> None:
        """Raise the log start offset of a partition this broker leads to `offset` (records no
        coordinator state needs any more; raises the broker's error)."""
        ...


#: Kafka's mapping of the append path's errors to what a coordinator's client is told
#: (GroupMetadataManager / TransactionStateManager); a coordinator may refine the size errors
APPEND_ERROR_MAP = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


@dataclass(frozen=True)
class CoordinatorResult(Generic[R]):
    """What a coordinator operation returns (Kafka's `CoordinatorResult`): the `records` to
    append to the coordinator's partition and the `response` its caller gets once they are
    committed (at once when there are none). The operation itself changes no state.

    - `replay(first_offset)`: applies the records to the coordinator's state once they are
      committed (the record at index i has offset first_offset + i). Offsets, transactional
      offsets, consumer groups and transactions replay; a classic group's record, as in Kafka
      (`replayRecords=false`), carries state its caller holds and applies in `replay`.
    - `producer`: (producer id, epoch) makes the batch that producer's transactional batch.
    - `size_error`: what a batch too large answers (Kafka answers a too-large offset commit
      INVALID_COMMIT_OFFSET_SIZE, a too-large group record UNKNOWN_SERVER_ERROR); None: the
      runtime's mapping.
    """

    records: Sequence[Record]
    response: R
    replay: Callable[[int], object] | None = None
    producer: tuple[int, int] | None = None
    size_error: ErrorCode | None = None


class WriteFailed(KafkaError):
    """A write's records were not committed: `error_code` is what the coordinator's client is
    told (the append path's error mapped as Kafka's coordinators map it, or NOT_COORDINATOR when
    the partition was unloaded or reloaded meanwhile). The state is the last committed one."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name, error_code)


_SIZE_ERRORS = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE)


class _PeriodicJob:
    __slots__ = ("job", "interval_s", "due", "running")

    def __init__(self, job: Callable[[], object], interval_s: float) -> None:
        self.job, self.interval_s = job, interval_s
        self.due = 0.0
        self.running = False

    async def run(self) -> None:
        self.running = True
        try:
            result = self.job()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("coordinator job %s failed", getattr(self.job, "__name__", self.job))
        finally:
            self.running = False


class CoordinatorRuntime:
    """The partitions of `topic` one coordinator serves (see the module doc).

    `reload_on_new_epoch`: a new leader epoch of a partition still owned reloads it (the
    transaction coordinator: its markers must carry the new coordinator epoch) instead of keeping
    its state (the group coordinator, as Kafka's `addLoadingPartition`)."""

    def __init__(
        self,
        topic: str,
        partition_log: PartitionLog,
        load: Callable[[int, object], Awaitable[object]],
        unloaded: Callable[[int], object],
        *,
        reload_on_new_epoch: bool,
        append_error_map: dict[ErrorCode, ErrorCode] = APPEND_ERROR_MAP,
        clock_ms: Callable[[], int] = lambda: 0,
        compression: int = 0,
        append_timeout_ms: int = 5000,
    ) -> None:
        self.topic = topic
        self.partition_log = partition_log
        self._load = load
        self._unloaded = unloaded
        self._reload_on_new_epoch = reload_on_new_epoch
        self._append_error_map = append_error_map
        self._clock_ms = clock_ms  # record timestamps: wall clock, ms since the epoch
        self._compression = compression  # the batches' codec (offsets.topic.compression.codec)
        self._append_timeout_ms = append_timeout_ms
        self._key_locks: dict[Hashable, tuple[trio.Lock, int]] = {}  # key -> (lock, holders and waiters)
        self.owned: dict[int, int] = {}  # partition -> leader epoch it is (being) loaded in
        self.loading: set[int] = set()
        self._loads: dict[int, object] = {}  # partition -> the token of its current load
        self._nursery: trio.Nursery | None = None
        self._loads_before_run: list[tuple[int, object]] = []
        self._jobs: list[_PeriodicJob] = []

    def every(self, interval_s: float, job: Callable[[], object]) -> None:
        """Run `job()` (a function, or a coroutine function) every `interval_s` seconds of trio's
        clock, on the runtime's one timer (Kafka's CoordinatorTimer): session and rebalance
        sweeps, offset and transactional-id expiry, transaction timeouts. A run still in
        progress when the next is due is not started twice. Register before `run`."""
        self._jobs.append(_PeriodicJob(job, interval_s))

    # ---- lifecycle ---------------------------------------------------------------------------
    async def run(self, nursery: trio.Nursery) -> None:
        """Start the loads asked for before the coordinator ran and the timer, in `nursery` (the
        coordinator's), where every later load and every periodic job runs too."""
        self._nursery = nursery
        for partition, token in self._loads_before_run:
            nursery.start_soon(self._run_load, partition, token)
        self._loads_before_run.clear()
        if self._jobs:
            nursery.start_soon(self._timer, nursery)

    async def _timer(self, nursery: trio.Nursery) -> None:
        """The one timer: sleep until the earliest job is due, start every due job (one run of
        each at a time), schedule its next run."""
        now = trio.current_time()
        for job in self._jobs:
            job.due = now + job.interval_s
        while True:
            await trio.sleep_until(min(job.due for job in self._jobs))
            now = trio.current_time()
            for job in self._jobs:
                if job.due <= now:
                    job.due = now + job.interval_s
                    if not job.running:
                        nursery.start_soon(job.run)

    def on_election(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """LeadershipListener: this broker leads `tp`; a partition of `topic` is loaded (in its
        own task). Returns whether a load started."""
        if tp[0] != self.topic:
            return False
        token = self.begin_loading(tp[1], leader_epoch)
        if token is None:
            return False
        if self._nursery is None:
            self._loads_before_run.append((tp[1], token))
        else:
            self._nursery.start_soon(self._run_load, tp[1], token)
        return True

    def on_resignation(self, tp: TopicPartition, leader_epoch: int | None) -> bool:
        """LeadershipListener: this broker no longer leads `tp`; returns whether it was a
        partition of `topic` (then unloaded)."""
        if tp[0] != self.topic:
            return False
        self.unload(tp[1])
        return True

    async def _run_load(self, partition: int, token: object) -> None:
        try:
            await self._load(partition, token)
        except Exception:
            log.exception("loading %s-%d failed", self.topic, partition)
            if self.is_current(partition, token):
                self.unload(partition)  # NOT_COORDINATOR until the next election

    # ---- ownership ---------------------------------------------------------------------------
    def begin_loading(self, partition: int, leader_epoch: int) -> object | None:
        """Mark `partition` as loading in `leader_epoch`; the token its load carries, or None
        when it is owned already (see `reload_on_new_epoch`)."""
        if partition in self.owned:
            if self.owned[partition] == leader_epoch or not self._reload_on_new_epoch:
                self.owned[partition] = leader_epoch
                return None
            self.unload(partition)
        self.owned[partition] = leader_epoch
        self.loading.add(partition)
        token = self._loads[partition] = object()
        return token

    def unload(self, partition: int) -> None:
        """Forget `partition` (a load in progress becomes stale) and tell the coordinator."""
        self.owned.pop(partition, None)
        self._loads.pop(partition, None)
        self.loading.discard(partition)
        self._unloaded(partition)

    def is_current(self, partition: int, token: object) -> bool:
        return self._loads.get(partition) is token

    def finish_loading(self, partition: int, token: object) -> bool:
        """The load of `token` is done: the partition is served now. False (nothing changes)
        when the load was overtaken."""
        if not self.is_current(partition, token):
            return False
        self.loading.discard(partition)
        return True

    def error_for(self, partition: int) -> ErrorCode:
        """NONE when the partition is served here now, else COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR."""
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def epoch_of(self, partition: int) -> int | None:
        """The leader epoch the partition is served in (None while loading or not owned)."""
        return None if partition in self.loading else self.owned.get(partition)

    # ---- the log -----------------------------------------------------------------------------
    async def replay(self, partition: int, token: object, buffer_size: int, on_batch) -> bool:
        """Replay the partition's log from its start to its end, `buffer_size` bytes per read,
        calling `on_batch(records, position, header)` for each batch and yielding to other tasks
        between reads. Returns False when the load was overtaken (stop: install nothing).
        Raises the broker's error for a partition not hosted here."""
        replica = self.partition_log.log((self.topic, partition))
        offset = replica.log_start_offset
        while offset < replica.log_end_offset and self.is_current(partition, token):
            read = replica.read(offset, buffer_size)
            if not read.records:
                break
            for position, header in iter_batches(read.records):
                on_batch(read.records, position, header)
            offset = read.next_offset
            await trio.sleep(0)
        return self.is_current(partition, token)

    # ---- the write path ----------------------------------------------------------------------
    async def write(
        self,
        partition: int,
        operation: Callable[[], CoordinatorResult[R]],
        *,
        epoch: int | None = None,
    ) -> R:
        """Run `operation` against the partition's current state and commit its records (the one
        write path of both coordinators, Kafka's `CoordinatorRuntime.scheduleWriteOperation`):
        the records go out as one v2 batch through the broker's append path (acks=-1, origin
        COORDINATOR); once the HW covers them and the partition is still loaded as it was, the
        result's `replay` applies them and its `response` is returned.

        Raises `WriteFailed` (the state untouched, so it is the last committed one) with
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS when the partition is not served here,
        or when it is unloaded or reloaded while the append waits (the records are in the log
        then, and the next load replays them); or with the append path's error mapped for the
        coordinator's client (NOT_ENOUGH_REPLICAS and timeouts: COORDINATOR_NOT_AVAILABLE; a
        lost leadership: NOT_COORDINATOR; `size_error` for a batch too large). `epoch`: the
        coordinator epoch the caller validated against (the transaction coordinator's); another
        one, or a partition still loading, is NOT_COORDINATOR. Writes that must not interleave
        run inside `one_at_a_time`."""
        error = self.error_for(partition)
        if epoch is not None and self.epoch_of(partition) != epoch:
            error = ErrorCode.NOT_COORDINATOR
        if error != ErrorCode.NONE:
            raise WriteFailed(error)
        token = self._loads.get(partition)
        result = operation()
        if not result.records:
            return result.response
        pid, producer_epoch = result.producer if result.producer is not None else (-1, -1)
        batch = build_batch(
            list(result.records),
            timestamp_ms=self._clock_ms(),
            compression=self._compression,
            producer_id=pid,
            producer_epoch=producer_epoch,
            transactional=result.producer is not None,
        )
        outcome = await self.partition_log.append((self.topic, partition), batch, self._append_timeout_ms)
        if outcome.error != ErrorCode.NONE:
            mapped = self._append_error_map.get(outcome.error, outcome.error)
            if result.size_error is not None and outcome.error in _SIZE_ERRORS:
                mapped = result.size_error
            log.warning(
                "write to %s-%d failed: %s (%s, told %s)",
                self.topic,
                partition,
                outcome.message,
                outcome.error.name,
                mapped.name,
            )
            raise WriteFailed(mapped, outcome.message)
        if self._loads.get(partition) is not token:
            raise WriteFailed(ErrorCode.NOT_COORDINATOR, "the partition was reloaded during the write")
        if result.replay is not None:
            result.replay(outcome.first_offset)
        return result.response

    def waiting(self, key: Hashable) -> int:
        """How many tasks wait for `key`'s turn (not counting its holder)."""
        found = self._key_locks.get(key)
        return 0 if found is None else found[1] - 1

    @contextlib.asynccontextmanager
    async def one_at_a_time(self, key: Hashable) -> AsyncIterator[None]:
        """Hold `key`'s turn for a sequence of operations and writes that must not interleave
        with another of the same key (a consumer group's heartbeat: its decision, its write,
        its deadlines). A key's lock lives only while someone holds or waits for it."""
        lock, users = self._key_locks.get(key) or (trio.Lock(), 0)
        self._key_locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._key_locks[key]
            if users == 1:
                del self._key_locks[key]
            else:
                self._key_locks[key] = (lock, users - 1)
