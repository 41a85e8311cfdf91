"""Incremental fetch sessions on the leader (KIP-227, Kafka's `FetchSessionCache`); no I/O here.

A Fetch request (v7+) names a session by (`session_id`, `session_epoch`):
- id 0, epoch -1: no session; the request lists every partition and the response answers each.
- epoch 0 (INITIAL): a full fetch that opens a new session (closing session `id` if it is not 0);
  the response carries the new session id (0 when no slot is free: the client stays sessionless).
- epoch > 0: an incremental fetch on session `id`; the request lists only partitions whose fetch
  parameters changed (added or updated) and `forgotten_topics_data` (removed); partitions it does
  not list keep their cached parameters. The response includes only partitions with something new:
  records, an error, or a high watermark / log start offset other than the one last sent.
- epoch -1 with id != 0: closes that session; the request is then served without a session.
Unknown ids answer FETCH_SESSION_ID_NOT_FOUND, a wrong epoch INVALID_FETCH_SESSION_EPOCH (whole
request). The cache holds `max_slots` sessions (`max.incremental.fetch.session.cache.slots`); a new
session evicts the least recently used one when full.

Settled partitions (issue 48; an optimisation of ours, not Kafka's): a follower's incremental
fetch reads only its session's *active* partitions. A partition becomes settled when a fetch found
its follower caught up (in the ISR, at our LEO, which was already its LEO) and nothing to send (the
HW and log start offset the session last sent): Kafka would record that fetch and leave the
partition out of the answer, and so would every later fetch until the partition changes. Rules:
- each follower fetch on the session stamps its time once (`clock`), which every settled
  partition's follower state reads as its caught-up and fetch time (`ReplicaState.clock`);
- any change of a partition (the replica manager's notify after an append, a HW or ISR move, a
  leadership, log or log start change: `changed`) makes it active again in every follower
  session that holds it, its follower state stamped with the session's last fetch first;
  a partition the request lists (new fetch parameters) is made active before the stamp;
- a fetch that waits watches its session (the session object is the watch key), not its
  partitions: `changed` names the sessions to wake;
- at least every `SWEEP_MS` a fetch reads every partition again (`follower_view`), so a change
  that no notify announces reaches the follower within that bound;
- a session that closes, is replaced or evicted, or is used by another replica settles nothing
  any more: its partitions are made active first.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.read_results import FetchPartition, FetchPartitionData, FetchTopic
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.partition import ReplicaState

INITIAL_EPOCH, FINAL_EPOCH, NO_SESSION = 0, -1, 0
#: a follower session reads every partition, settled or not, at least this often (ms)
SWEEP_MS = 1000


@dataclass
class _Cached:
    params: FetchPartition
    sent_high_watermark: int = -2  # never sent: the first answer always includes the partition
    sent_log_start_offset: int = -2


@dataclass(eq=False)  # compared and hashed by identity: a session is a watch key
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, _Cached] = field(default_factory=dict)
    # the partitions' parameters by topic, in `partitions` order, and where each sits in it; kept
    # between fetches (an incremental fetch changes a few) and rebuilt when partitions come or go
    _view: list[FetchTopic] | None = None
    _slots: dict[TopicPartition, tuple[list[FetchPartition], int]] = field(default_factory=dict)
    # follower sessions (module docstring, "Settled partitions"): the follower using it (-1: not
    # one yet), its settled partitions with their follower states, the time of its latest fetch
    # (ms, shared with those states) and of its latest full read
    replica_id: int = -1
    settled: dict[TopicPartition, ReplicaState] = field(default_factory=dict)
    clock: list[int] = field(default_factory=lambda: [0])
    swept_ms: int = 0
    waiting: int = 0  # its fetches waiting now (woken through `FetchSessionCache.changed`)
    _active: dict[TopicPartition, None] = field(default_factory=dict)  # partitions not settled

    def __post_init__(self) -> None:
        self._active = dict.fromkeys(self.partitions)

    def update(self, key: TopicPartition, params: FetchPartition) -> None:
        """A partition's new fetch parameters (added when the session lacks it)."""
        if self.settled:
            self.unsettle(key)
        cached = self.partitions.get(key)
        if cached is None:
            self.partitions[key] = _Cached(params)
            self._active[key] = None
            self._view = None
            return
        cached.params = params
        if self._view is not None:
            partitions, index = self._slots[key]
            partitions[index] = params

    def forget(self, key: TopicPartition) -> None:
        if self.settled:
            self.unsettle(key)
        if self.partitions.pop(key, None) is not None:
            self._active.pop(key, None)
            self._view = None

    def settle(self, key: TopicPartition, state: ReplicaState) -> None:
        """A fetch found `key` settled: its follower (`state`) caught up, nothing to send. Later
        fetches leave it out (`active_view`) and stamp `state` through `clock`."""
        if key in self._active:
            del self._active[key]
            self.settled[key] = state
            state.clock = self.clock

    def unsettle(self, key: TopicPartition) -> None:
        """`key` is active again; its follower state keeps this session's last fetch as its
        caught-up and fetch time (unless another session settled it since)."""
        state = self.settled.pop(key, None)
        if state is None:
            return
        self._active[key] = None
        if state.clock is self.clock:
            state.clock = None
            ms = self.clock[0]
            state.last_caught_up_ms = max(state.last_caught_up_ms, ms)
            state.last_fetch_ms = max(state.last_fetch_ms, ms)

    def unsettle_all(self) -> None:
        for key in list(self.settled):
            self.unsettle(key)

    def active_view(self) -> list[FetchTopic]:
        """`view()` without the settled partitions, built in time proportional to the others."""
        if not self.settled:
            return self.view()
        partitions = self.partitions
        by_topic: dict[str, list[FetchPartition]] = {}
        for key in self._active:
            by_topic.setdefault(key[0], []).append(partitions[key].params)
        return [FetchTopic(topic, ps) for topic, ps in by_topic.items()]

    def view(self) -> list[FetchTopic]:
        """Every partition's parameters by topic: a copy a fetch may keep while the session
        moves on."""
        if self._view is None:
            by_topic: dict[str, list[FetchPartition]] = {}
            self._slots = {}
            for key, cached in self.partitions.items():
                partitions = by_topic.setdefault(key[0], [])
                self._slots[key] = (partitions, len(partitions))
                partitions.append(cached.params)
            self._view = [FetchTopic(t, ps) for t, ps in by_topic.items()]
        return [FetchTopic(t.topic, t.partitions.copy()) for t in self._view]


class SessionError(KafkaError):
    """A fetch session a Fetch cannot use (KIP-227): FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR."""

    def __init__(self, code: ErrorCode):
        super().__init__(code.name, code)


class FetchContext:
    """What one Fetch reads (`topics`: every partition of the session, or of the request when
    sessionless) and answers (`session_id`; `include` filters the per-partition answers)."""

    def __init__(self, topics: list[FetchTopic] | None, session: FetchSession | None, incremental: bool):
        self._topics = topics  # None: the session's view, built on first use
        self.session = session
        self.incremental = incremental

    @property
    def topics(self) -> list[FetchTopic]:
        if self._topics is None:
            assert self.session is not None
            self._topics = self.session.view()
        return self._topics

    @property
    def session_id(self) -> int:
        return self.session.session_id if self.session is not None else NO_SESSION

    def unchanged(self, topic: str, partition: int, high_watermark: int, log_start_offset: int) -> bool:
        """Whether an incremental fetch would leave out a partition with no records and no error
        at this high watermark and log start offset (both already sent): the reader may skip
        building its answer."""
        if not self.incremental or self.session is None:
            return False
        cached = self.session.partitions.get((topic, partition))
        return (
            cached is not None
            and cached.sent_high_watermark == high_watermark
            and cached.sent_log_start_offset == log_start_offset
        )

    def include(self, topic: str, entry: FetchPartitionData) -> bool:
        """Whether a partition's read goes in the response; records what the session has now
        sent."""
        if self.session is None:
            return True
        cached = self.session.partitions.get((topic, entry.partition))
        if cached is None:
            return True
        changed = (
            bool(entry.records)
            or entry.error_code != ErrorCode.NONE
            or entry.high_watermark != cached.sent_high_watermark
            or entry.log_start_offset != cached.sent_log_start_offset
        )
        if changed or not self.incremental:
            cached.sent_high_watermark = entry.high_watermark
            cached.sent_log_start_offset = entry.log_start_offset
        return changed or not self.incremental


def _params(p) -> FetchPartition:
    return FetchPartition(
        p.partition,
        p.fetch_offset,
        p.partition_max_bytes,
        p.get("current_leader_epoch", -1),
        p.get("log_start_offset", -1),
        p.get("last_fetched_epoch", -1),
    )


def _request_topics(body) -> list[FetchTopic]:
    return [FetchTopic(t.topic, [_params(p) for p in t.partitions]) for t in body.topics]


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000):
        self.max_slots = max_slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._ids = itertools.count(1)
        # the follower sessions holding each partition (`follower_view` registers a session)
        self._followers: dict[TopicPartition, set[FetchSession]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, body) -> FetchContext:
        """The FetchContext for a Fetch request body; raises SessionError (whole-request error)."""
        session_id, epoch = body.get("session_id", NO_SESSION), body.get("session_epoch", FINAL_EPOCH)
        if epoch == FINAL_EPOCH:
            self._drop(session_id)
            return FetchContext(_request_topics(body), None, incremental=False)
        if epoch == INITIAL_EPOCH:
            self._drop(session_id)
            topics = _request_topics(body)
            session = self._create({(t.topic, p.partition): _Cached(p) for t in topics for p in t.partitions})
            return FetchContext(topics, session, incremental=False)
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != session.epoch:
            raise SessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        for t in body.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                if session.replica_id >= 0 and key not in session.partitions:
                    self._index(session, key)
                session.update(key, _params(p))
        for t in body.get("forgotten_topics_data", ()):
            for index in t.partitions:
                key = (t.topic, index)
                session.forget(key)
                self._unindex(session, key)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        self._sessions.move_to_end(session_id)
        return FetchContext(None, session, incremental=True)  # a follower reads `follower_view` instead

    def _create(self, partitions: dict) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._drop(next(iter(self._sessions)))
        session_id = next(self._ids)
        if session_id >= 2**31 - 1:
            self._ids = itertools.count(1)
            session_id = next(self._ids)
        session = FetchSession(session_id, 1, partitions)
        self._sessions[session_id] = session
        return session

    # ---- follower sessions: settled partitions (module docstring) ------------------------------
    def follower_view(self, session: FetchSession, replica_id: int, now_ms: int) -> list[FetchTopic]:
        """The partitions an incremental fetch of follower `replica_id` on `session` reads at
        `now_ms` (wall clock, ms): the active ones, or all of them when `SWEEP_MS` passed since
        the last full read. Stamps the fetch on every settled partition (`clock`)."""
        if session.replica_id != replica_id:
            self._release(session)
            session.replica_id = replica_id
            for key in session.partitions:
                self._index(session, key)
        if now_ms - session.swept_ms >= SWEEP_MS or now_ms < session.swept_ms:
            session.unsettle_all()
            session.swept_ms = now_ms
        session.clock[0] = now_ms
        return session.active_view()

    def changed(self, key: TopicPartition) -> Collection[FetchSession]:
        """Partition `key` changed (the replica manager's notify): it is active again in every
        follower session holding it; returns those sessions, whose waiting fetches to wake (not
        a copy: the caller only iterates it, and waking a fetch changes no session's partitions)."""
        sessions = self._followers.get(key)
        if not sessions:
            return ()
        for session in sessions:
            if session.settled:
                session.unsettle(key)
        return sessions

    def _drop(self, session_id: int) -> None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._release(session)

    def _release(self, session: FetchSession) -> None:
        """`session` settles nothing any more: its partitions active, out of the index."""
        session.unsettle_all()
        if session.replica_id >= 0:
            for key in session.partitions:
                self._unindex(session, key)
            session.replica_id = -1

    def _index(self, session: FetchSession, key: TopicPartition) -> None:
        self._followers.setdefault(key, set()).add(session)

    def _unindex(self, session: FetchSession, key: TopicPartition) -> None:
        sessions = self._followers.get(key)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._followers[key]
