"""The partition leader's side of share groups (Kafka's `SharePartitionManager`, KIP-932): the
share-partitions of every share group reading a partition this broker leads, the share
sessions, and ShareFetch / ShareAcknowledge over them (typed results; the handlers in
`broker/handlers/share_group.py` build the responses).

- A share-partition's state is durable at the share coordinator (`persister.py`): read when
  this leader first serves the share-partition (with this leader's epoch, which fences the
  writes of an earlier leader), written before a ShareFetch or ShareAcknowledge carrying
  acknowledgements is answered (so an acknowledgement answered NONE survives a failover; until
  then it is pending: a released record is not handed out again, and a failed write rolls the
  acknowledgements back, the member holding the records until their lock runs out), and
  written by the timer (every `LOCK_SWEEP_S`) after acquisitions, timed-out locks and released
  members: an answer is never held while its records' locks run. A record acquired when the
  state was written comes back Available at the next leader, its delivery count kept. While the
  state cannot be read (the coordinator is unavailable) the partition hands out nothing.
- A share-partition never written starts where the group's `share.auto.offset.reset` says
  (latest, Kafka's default: the high watermark when the group first reads the partition;
  earliest: the log start offset). With `share.isolation.level=read_committed` it reads up to
  the last stable offset and archives the records of aborted transactions; the lock duration
  is the group's `share.record.lock.duration.ms`. Without a persister (unit tests) the state
  lives in this broker's memory only.
- ShareFetch applies the request's acknowledgements first, then acquires for the member from
  each partition of its session that this broker leads: records up to the high watermark, read
  as whole batches from the first Available offset (about as many bytes as `MaxRecords` records
  took lately, not `MaxBytes`), `MaxRecords` over the request (batches are not split) and at
  most `group.share.partition.max.record.locks` in flight per partition. With nothing to hand out it
  waits up to `MaxWaitMs` for new records (or a lock to run out).
- A share-partition's state is dropped when this broker stops leading its partition (the next
  leader reads it from the share coordinator), when no share session holds it any more (once
  written), and when a write finds its state epoch fenced (AlterShareGroupOffsets reset it).
- Locks that ran out are released when their partition is next read (and by `expire_locks`, on
  the manager's timer). A session that closes (epoch -1) or is replaced (epoch 0) releases
  everything its member holds on its partitions.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import trio

from broker.errors import error_code_for
from broker.share.share_partition import AcquiredRange, Batch, SharePartition
from broker.share.share_sessions import ShareSession, ShareSessionCache, ShareSessionError
from coordinator.group.group_config import GroupConfigs
from coordinator.share.records import SharePartitionKey, StateBatch, StateWrite
from protocol import record_batch as rb
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicIdPartition, TopicPartition

log = logging.getLogger(__name__)

#: one partition's acknowledgements: (first offset, last offset, acknowledge types)
Acks = list[tuple[int, int, list[int]]]
LOCK_SWEEP_S = 0.1
MIN_READ_BYTES = 64 * 1024
DEFAULT_RECORD_BYTES = 1024  # a partition's bytes per record before its first read


@dataclass
class SharePartitionResult:
    """One partition of a ShareFetch / ShareAcknowledge answer: the fetch's error, the
    acknowledgements' error, the leader (-1 unknown) and, for a fetch, the records (whole
    batches) and the ranges of them the member acquired."""

    partition: int
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    acknowledge_error_code: int = ErrorCode.NONE
    leader_id: int = -1
    leader_epoch: int = -1
    records: bytes = b""
    acquired: list[AcquiredRange] = field(default_factory=list)


@dataclass
class ShareResult:
    """A ShareFetch / ShareAcknowledge answer: the top-level error (a session's), the lock
    duration (ms) and the partitions by topic id."""

    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    lock_timeout_ms: int = 0
    topics: dict[uuid.UUID, list[SharePartitionResult]] = field(default_factory=dict)


@dataclass(frozen=True)
class SharePartitionView:
    """What the metrics and the console show of one share-partition this broker leads: its SPSO,
    SPEO, in-flight records by state (Available, Acquired, Acknowledged, Archived), the lowest and
    highest delivery count among them, and its lag (the high watermark less the SPSO less the
    records done past it)."""

    group_id: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    records: dict[str, int]
    delivery_counts: tuple[int, int]
    lag: int


@dataclass(frozen=True)
class ShareConfig:
    lock_duration_ms: int
    delivery_limit: int
    max_record_locks: int
    max_sessions: int = 2000


class SharePartitionManager:
    def __init__(
        self,
        replica_manager,
        metadata_cache,
        config: ShareConfig,
        now_ms: Callable[[], float],
        group_configs: GroupConfigs,
        persister=None,
    ) -> None:
        """`persister`: a `SharePersister` (None: the state lives in memory only)."""
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.config = config
        self.now_ms = now_ms
        self.group_configs = group_configs
        self.sessions = ShareSessionCache(config.max_sessions)
        self.persister = persister
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self._loading: dict[tuple[str, TopicPartition], trio.Event] = {}
        self._write_locks: dict[tuple[str, TopicPartition], trio.Lock] = {}
        self._record_bytes: dict[TopicPartition, float] = {}  # bytes per record of the last read
        #: Kafka's share-group-metrics: records acknowledged by type (1 ACCEPT, 2 RELEASE, 3 REJECT,
        #: 0 GAP), acknowledgement batches applied, and share-partition loads with their time (ms)
        self.records_acknowledged: dict[int, int] = dict.fromkeys((0, 1, 2, 3), 0)
        self.acknowledgements = 0
        self.partition_loads = 0
        self.partition_load_ms = 0.0

    # ---- names and bounds -------------------------------------------------------------------------
    async def _load(self, group_id: str, tp: TopicPartition) -> SharePartition | None:
        """The share-partition of `group_id` on `tp` (led here), read from the share coordinator
        the first time; None while its state cannot be read. Raises the partition's error when
        this broker does not lead it."""
        key = (group_id, tp)
        while key in self._loading:
            await self._loading[key].wait()
        found = self.partitions.get(key)
        if found is not None:
            return found
        hosted = self.replica_manager.get_partition(*tp)
        hosted.require_leader()
        leader_epoch = hosted.leader_epoch
        done = self._loading[key] = trio.Event()
        started = self.now_ms()
        try:
            sp = await self._read_state(group_id, tp, hosted, leader_epoch)
            self.partition_loads += 1
            self.partition_load_ms += self.now_ms() - started
            if (
                sp is None
                or self.replica_manager.partitions.get(tp) is not hosted
                or hosted.leader_epoch != leader_epoch
            ):
                return None  # not readable, or the leadership changed meanwhile
            self.partitions[key] = sp
            log.info("share group %s reads %s-%d from offset %d", group_id, *tp, sp.start_offset)
            return sp
        finally:
            del self._loading[key]
            done.set()

    async def _read_state(self, group_id: str, tp: TopicPartition, hosted, leader_epoch: int) -> SharePartition | None:
        def fresh(start: int) -> SharePartition:
            sp = SharePartition(
                max(start, hosted.log.log_start_offset),
                lock_duration_ms=self.config.lock_duration_ms,
                delivery_limit=self.config.delivery_limit,
                max_in_flight=self.config.max_record_locks,
            )
            sp.leader_epoch = leader_epoch
            return sp

        earliest = self.group_configs.get(group_id, "share.auto.offset.reset") == "earliest"
        reset = hosted.log.log_start_offset if earliest else hosted.high_watermark
        if self.persister is None:
            return fresh(reset)
        key = self._state_key(group_id, tp)
        if key is None:
            return None
        answer = await self.persister.read(key, leader_epoch)
        if answer.error_code != ErrorCode.NONE:
            log.info(
                "share group %s cannot read the state of %s-%d: %s", group_id, *tp, ErrorCode(answer.error_code).name
            )
            return None
        if answer.start_offset < 0:  # never written: start where the group's reset says, durably
            sp = fresh(reset)
            if await self._persist(group_id, tp, sp) != ErrorCode.NONE:
                return None
            return sp
        sp = fresh(answer.start_offset)
        sp.state_epoch = answer.state_epoch
        sp.restore(answer.batches, hosted.log.log_end_offset)
        return sp

    def _state_key(self, group_id: str, tp: TopicPartition) -> SharePartitionKey | None:
        topic_id = self.metadata_cache.topic_ids.get(tp[0])
        return None if topic_id is None else SharePartitionKey(group_id, topic_id, tp[1])

    async def _persist(
        self, group_id: str, tp: TopicPartition, sp: SharePartition, token: object | None = None
    ) -> ErrorCode:
        """Write `sp`'s state to the share coordinator (one write at a time per share-partition,
        each carrying the state as it is when its turn comes); NONE once committed. With a
        `token` the write carries that request's pending acknowledgements, which it then
        commits, or rolls back when it failed (before the next write takes its turn). A newer
        leader's epoch (FENCED_LEADER_EPOCH) is NOT_LEADER_OR_FOLLOWER."""
        if self.persister is None:
            sp.dirty = False
            if token is not None:
                sp.commit(token)
            return ErrorCode.NONE
        key = self._state_key(group_id, tp)
        if key is None:
            if token is not None:
                sp.rollback(token)
            return ErrorCode.UNKNOWN_TOPIC_ID
        lock = self._write_locks.setdefault((group_id, tp), trio.Lock())
        async with lock:
            start, batches, done = sp.persisted(include=token)
            sp.dirty = False
            write = StateWrite(sp.state_epoch, sp.leader_epoch, start, done, tuple(StateBatch(*b) for b in batches))
            answer = await self.persister.write(key, write)
            if token is not None:
                if answer.error_code == ErrorCode.NONE:
                    sp.commit(token)
                else:
                    sp.rollback(token)
        if answer.error_code == ErrorCode.NONE:
            return ErrorCode.NONE
        sp.dirty = True
        log.info(
            "share group %s: writing the state of %s-%d failed: %s", group_id, *tp, ErrorCode(answer.error_code).name
        )
        if answer.error_code == ErrorCode.FENCED_LEADER_EPOCH:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if answer.error_code == ErrorCode.FENCED_STATE_EPOCH and self.partitions.get((group_id, tp)) is sp:
            del self.partitions[(group_id, tp)]  # its offsets were reset: the next fetch reads them anew
        return ErrorCode(answer.error_code)

    def _read_end(self, group_id: str, hosted) -> tuple[bool, int]:
        """(read_committed, the offset the group may read up to): the last stable offset with
        the group's `share.isolation.level=read_committed`, else the high watermark."""
        committed = self.group_configs.get(group_id, "share.isolation.level") == "read_committed"
        return committed, hosted.last_stable_offset if committed else hosted.high_watermark

    def _leader(self, tp: TopicPartition) -> tuple[int, int]:
        state = self.metadata_cache.get_partition(*tp)
        return (state.leader, state.leader_epoch) if state is not None else (-1, -1)

    # ---- acknowledgements --------------------------------------------------------------------------
    def _acknowledge(self, group_id: str, member_id: str, tp: TopicPartition, acks: Acks, token: object) -> int:
        try:
            self.replica_manager.get_partition(*tp).require_leader()
        except Exception as e:
            return error_code_for(e)
        sp = self.partitions.get((group_id, tp))
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        sp.expire_locks(self.now_ms())
        for first, last, types in acks:
            error = sp.acknowledge(member_id, first, last, types, token)
            if error != ErrorCode.NONE:
                sp.rollback(token)  # a partition's acknowledgements take effect together or not at all
                return error
            self.acknowledgements += 1
            if len(types) == 1:
                self.records_acknowledged[types[0]] += last - first + 1
            else:
                for kind in types:
                    self.records_acknowledged[kind] += 1
        return ErrorCode.NONE

    def _release(self, session: ShareSession) -> None:
        """Everything the session's member holds on its partitions goes back (its session ended);
        fetches waiting on a partition that got records back are woken."""
        for topic_id, partition in session.partitions:
            name = self.metadata_cache.topic_name(topic_id)
            sp = self.partitions.get((session.group_id, (name, partition))) if name else None
            if sp is not None:
                released = sp.release_member(session.member_id)
                if released:
                    log.debug("member %s of %s released %d records", session.member_id, session.group_id, released)
                    self.replica_manager.watchers.notify((name, partition))

    def on_disconnect(self, connection_id: str) -> None:
        """A client connection closed (the server's disconnect listener): the share sessions it
        opened end, and their members' records are released (Kafka does the same)."""
        for session in self.sessions.disconnected(connection_id):
            log.info("member %s of share group %s disconnected", session.member_id, session.group_id)
            self._release(session)

    # ---- ShareFetch ----------------------------------------------------------------------------------
    async def share_fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        topics: dict[uuid.UUID, dict[int, Acks]],
        forgotten: list[TopicIdPartition],
        may_read: Callable[[str], bool],
        connection_id: str = "",
    ) -> ShareResult:
        """ShareFetch (key 78) v1 for one member; `topics`: topic id -> partition -> the
        acknowledgements carried for it; `connection_id`: the client connection it came on (a
        session it opens ends when that connection closes)."""
        result = ShareResult(lock_timeout_ms=self.config.lock_duration_ms)
        added = [(t, p) for t, parts in topics.items() for p in parts]
        try:
            step = self.sessions.fetch(group_id, member_id, epoch, added, forgotten, connection_id)
        except ShareSessionError as e:
            return ShareResult(e.error_code, str(e))
        if step.replaced is not None:
            self._release(step.replaced)
        answers: dict[TopicIdPartition, SharePartitionResult] = {}
        token = object()  # this request's acknowledgements, pending until written
        for topic_id, parts in topics.items():
            for partition, acks in parts.items():
                answer = answers[(topic_id, partition)] = SharePartitionResult(partition)
                name = self.metadata_cache.topic_name(topic_id)
                if name is None:
                    answer.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                elif not may_read(name):
                    answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif acks:
                    answer.acknowledge_error_code = self._acknowledge(
                        group_id, member_id, (name, partition), acks, token
                    )
        acked = sorted(((t, p) for t, parts in topics.items() for p, acks in parts.items() if acks), key=_order)
        if step.closing:
            self._release(step.session)
        else:
            await self._acquire(
                group_id, member_id, step.session, answers, max_wait_ms, max_bytes, max_records, may_read
            )
        for key in acked:
            answer = answers[key]
            if answer.acknowledge_error_code == ErrorCode.NONE:  # not durable: the client must not hear success
                answer.acknowledge_error_code = await self._persist_answer(group_id, key, token)
        for (topic_id, _), answer in sorted(answers.items(), key=lambda kv: _order(kv[0])):
            result.topics.setdefault(topic_id, []).append(answer)
        return result

    async def _acquire(
        self,
        group_id: str,
        member_id: str,
        session: ShareSession,
        answers: dict[TopicIdPartition, SharePartitionResult],
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        may_read: Callable[[str], bool],
    ) -> None:
        readable: list[tuple[TopicIdPartition, TopicPartition]] = []
        for topic_id, partition in sorted(session.partitions, key=_order):
            name = self.metadata_cache.topic_name(topic_id)
            if name is None or not may_read(name):
                continue
            readable.append(((topic_id, partition), (name, partition)))
        for key, tp in readable:
            try:
                await self._load(group_id, tp)
            except Exception as e:
                answer = answers.setdefault(key, SharePartitionResult(key[1]))
                answer.error_code = error_code_for(e)
                answer.leader_id, answer.leader_epoch = self._leader(tp)
        got = self._acquire_once(group_id, member_id, readable, answers, max_bytes, max_records)
        if got or max_wait_ms <= 0 or not readable:
            return
        keys = [tp for _, tp in readable]

        def news() -> bool:
            return any(self._has_news(group_id, tp) for tp in keys)

        await self.replica_manager.watchers.wait_for(keys, news, max_wait_ms / 1000)
        self._acquire_once(group_id, member_id, readable, answers, max_bytes, max_records)

    async def _persist_answer(self, group_id: str, key: TopicIdPartition, token: object) -> ErrorCode:
        """Make the request's acknowledgements of one partition durable (committed, or rolled
        back when the write fails): the answer's acknowledgement error."""
        name = self.metadata_cache.topic_name(key[0])
        sp = self.partitions.get((group_id, (name, key[1]))) if name else None
        if sp is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER  # forgotten meanwhile: leadership moved
        return await self._persist(group_id, (name, key[1]), sp, token)

    def _has_news(self, group_id: str, tp: TopicPartition) -> bool:
        sp = self.partitions.get((group_id, tp))
        hosted = self.replica_manager.partitions.get(tp)
        if hosted is None:
            return True  # no longer hosted: answer now
        if sp is None:
            return False  # its state could not be read: the next fetch tries again
        sp.expire_locks(self.now_ms())
        return sp.acquirable() and sp.next_fetch_offset() < self._read_end(group_id, hosted)[1]

    def _acquire_once(
        self,
        group_id: str,
        member_id: str,
        readable: list[tuple[TopicIdPartition, TopicPartition]],
        answers: dict[TopicIdPartition, SharePartitionResult],
        max_bytes: int,
        max_records: int,
    ) -> int:
        """Acquire from each readable partition in turn; -> records acquired."""
        total, budget = 0, max_bytes
        for key, tp in readable:
            answer = answers.get(key)
            if answer is None:
                answer = answers[key] = SharePartitionResult(key[1])
            sp = self.partitions.get((group_id, tp))
            if total >= max_records or budget <= 0 or answer.acquired or answer.error_code or sp is None:
                continue
            try:
                hosted = self.replica_manager.get_partition(*tp)
                hosted.require_leader()
                sp.lock_duration_ms = self.group_configs.get(group_id, "share.record.lock.duration.ms")
                sp.expire_locks(self.now_ms())
                committed, end = self._read_end(group_id, hosted)
                start = sp.next_fetch_offset()
                if start >= end or not sp.acquirable():
                    continue
                size = self._read_size(tp, max_records - total, budget)
                info = hosted.read(start, size, committed_only=True, min_one_batch=True, read_committed=committed)
                aborted = hosted.log.collect_aborted_txns(start, info.next_offset) if committed else []
            except Exception as e:
                answer.error_code = error_code_for(e)
                answer.leader_id, answer.leader_epoch = self._leader(tp)
                continue
            batches = [(pos, h) for pos, h in rb.iter_batches(info.records)]
            self._learn_size(tp, batches, len(info.records))
            acquired = sp.acquire(member_id, _acquirable(batches, aborted), max_records - total, self.now_ms())
            if not acquired:
                continue
            last = acquired[-1].last_offset
            end = next((pos + h.size for pos, h in batches if h.last_offset >= last), len(info.records))
            first = next((pos for pos, h in batches if h.last_offset >= acquired[0].first_offset), 0)
            answer.records = bytes(info.records[first:end])
            answer.acquired = acquired
            sp.dirty = True  # delivery counts: written by the timer, not before the answer (its locks run)
            total += sum(r.last_offset - r.first_offset + 1 for r in acquired)
            budget -= len(answer.records)
        return total

    def _read_size(self, tp: TopicPartition, records: int, budget: int) -> int:
        """How many bytes to read for `records` records of `tp` (bytes): twice what they took
        lately, at least `MIN_READ_BYTES`, at most the request's budget. MaxBytes may be tens of
        megabytes while MaxRecords wants a few hundred records: reading (and checking the CRCs
        of) all of it would cost far more than the records handed out."""
        estimate = self._record_bytes.get(tp, DEFAULT_RECORD_BYTES)
        return min(budget, max(MIN_READ_BYTES, int(records * estimate * 2)))

    def _learn_size(self, tp: TopicPartition, batches, size: int) -> None:
        count = sum(h.last_offset - h.base_offset + 1 for _, h in batches)
        if count:
            self._record_bytes[tp] = size / count

    # ---- ShareAcknowledge ------------------------------------------------------------------------------
    async def share_acknowledge(
        self, group_id: str, member_id: str, epoch: int, topics: dict[uuid.UUID, dict[int, Acks]], may_read
    ) -> ShareResult:
        """ShareAcknowledge (key 79) v1 for one member; answered once the acknowledgements are
        durable (a failed write answers its error)."""
        try:
            step = self.sessions.acknowledge(group_id, member_id, epoch)
        except ShareSessionError as e:
            return ShareResult(e.error_code, str(e))
        result = ShareResult(lock_timeout_ms=self.config.lock_duration_ms)
        token = object()  # this request's acknowledgements, pending until written
        for topic_id, parts in topics.items():
            name = self.metadata_cache.topic_name(topic_id)
            for partition, acks in sorted(parts.items()):
                answer = SharePartitionResult(partition)
                if name is None:
                    answer.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                elif not may_read(name):
                    answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                else:
                    answer.error_code = self._acknowledge(group_id, member_id, (name, partition), acks, token)
                    if answer.error_code == ErrorCode.NONE and acks:
                        answer.error_code = await self._persist_answer(group_id, (topic_id, partition), token)
                    if answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                        answer.leader_id, answer.leader_epoch = self._leader((name, partition))
                result.topics.setdefault(topic_id, []).append(answer)
        if step.closing:
            self._release(step.session)
        return result

    # ---- views -----------------------------------------------------------------------------------------
    def share_partition_views(self) -> list[SharePartitionView]:
        """The share-partitions this broker holds now, by group, topic and partition."""
        views = []
        for (group_id, (topic, partition)), sp in sorted(self.partitions.items()):
            counts = dict.fromkeys(("Available", "Acquired", "Acknowledged", "Archived"), 0)
            low, high = 0, 0
            for run in sp.runs:
                counts[run.state.name.capitalize()] += run.size
                low = run.delivery_count if not low else min(low, run.delivery_count)
                high = max(high, run.delivery_count)
            hosted = self.replica_manager.partitions.get((topic, partition))
            end = hosted.high_watermark if hosted is not None else sp.end_offset
            done = counts["Acknowledged"] + counts["Archived"]
            lag = max(0, end - sp.start_offset - done)
            views.append(
                SharePartitionView(group_id, topic, partition, sp.start_offset, sp.end_offset, counts, (low, high), lag)
            )
        return views

    # ---- leadership (LeadershipListener) ---------------------------------------------------------------
    def on_election(self, tp: TopicPartition, leader_epoch: int) -> None:
        """This broker leads `tp` now: any share state it held from before is stale."""
        self._forget(tp)

    def on_resignation(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """This broker no longer leads `tp` (a follower now, or the replica stopped: the topic
        was deleted or moved): its share-partitions go, so a topic created again under the same
        name, or a later leadership, starts anew."""
        self._forget(tp)

    def _forget(self, tp: TopicPartition) -> None:
        for key in [k for k in self.partitions if k[1] == tp]:
            del self.partitions[key]
            self._write_locks.pop(key, None)

    # ---- the timer -----------------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The timer's two tasks: release records whose lock ran out (waking the fetches waiting
        for them), and write the state of share-partitions changed outside an acknowledgement
        (acquisitions, timed-out locks, released members). A write that waits for a share
        coordinator never holds up lock expiry."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire_locks)
            nursery.start_soon(self._write_changed)
            task_status.started()

    async def _expire_locks(self) -> None:
        while True:
            await trio.sleep(LOCK_SWEEP_S)
            now = self.now_ms()
            for (_, tp), sp in list(self.partitions.items()):
                if sp.expire_locks(now):
                    self.replica_manager.watchers.notify(tp)

    async def _write_changed(self) -> None:
        while True:
            await trio.sleep(LOCK_SWEEP_S)
            for (group_id, tp), sp in list(self.partitions.items()):
                if sp.dirty and self.partitions.get((group_id, tp)) is sp:
                    await self._persist(group_id, tp, sp)
            self._evict_unused()

    def _evict_unused(self) -> None:
        """Drop the share-partitions no share session holds once their state is written (Kafka
        drops a group's share-partitions when it empties): an administrator may reset their
        offsets now, and the next member reads the state anew."""
        if self.persister is None:
            return
        held: set[tuple[str, TopicPartition]] = set()
        for session in self.sessions.sessions.values():
            for topic_id, partition in session.partitions:
                name = self.metadata_cache.topic_name(topic_id)
                if name is not None:
                    held.add((session.group_id, (name, partition)))
        for key, sp in list(self.partitions.items()):
            lock = self._write_locks.get(key)
            if key not in held and not sp.dirty and (lock is None or not lock.locked()):
                del self.partitions[key]
                self._write_locks.pop(key, None)


def _order(key: TopicIdPartition) -> tuple[str, int]:
    """The order partitions are answered and written in: by topic id, then partition."""
    return str(key[0]), key[1]


def _acquirable(batches, aborted) -> Iterator[Batch]:
    """The batches as acquisition sees them: control batches, and with read_committed the
    batches of aborted transactions (`aborted`: (producer id, first offset) from the log's
    aborted transaction index), are never handed out (Kafka's consumer skips them likewise)."""
    starts = sorted(aborted, key=lambda a: a.first_offset)
    aborting: set[int] = set()
    i = 0
    for _, h in batches:
        while i < len(starts) and starts[i].first_offset <= h.base_offset:
            aborting.add(starts[i].producer_id)
            i += 1
        if h.is_control:
            aborting.discard(h.producer_id)
            yield Batch(h.base_offset, h.last_offset, True)
        else:
            yield Batch(h.base_offset, h.last_offset, h.is_transactional and h.producer_id in aborting)
