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
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, field

from broker.read_results import FetchPartition, FetchPartitionData, FetchTopic
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicPartition

INITIAL_EPOCH, FINAL_EPOCH, NO_SESSION = 0, -1, 0


@dataclass
class _Cached:
    params: FetchPartition
    sent_high_watermark: int = -2  # never sent: the first answer always includes the partition
    sent_log_start_offset: int = -2


@dataclass
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, _Cached] = field(default_factory=dict)
    # the partitions' parameters by topic, in `partitions` order, and where each sits in it; kept
    # between fetches (an incremental fetch changes a few) and rebuilt when partitions come or go
    _view: list[FetchTopic] | None = None
    _slots: dict[TopicPartition, tuple[list[FetchPartition], int]] = field(default_factory=dict)

    def update(self, key: TopicPartition, params: FetchPartition) -> None:
        """A partition's new fetch parameters (added when the session lacks it)."""
        cached = self.partitions.get(key)
        if cached is None:
            self.partitions[key] = _Cached(params)
            self._view = None
            return
        cached.params = params
        if self._view is not None:
            partitions, index = self._slots[key]
            partitions[index] = params

    def forget(self, key: TopicPartition) -> None:
        if self.partitions.pop(key, None) is not None:
            self._view = None

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

    def __init__(self, topics: list[FetchTopic], session: FetchSession | None, incremental: bool):
        self.topics = topics
        self.session = session
        self.incremental = incremental

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

    def __len__(self) -> int:
        return len(self._sessions)

    def context(self, body) -> FetchContext:
        """The FetchContext for a Fetch request body; raises SessionError (whole-request error)."""
        session_id, epoch = body.get("session_id", NO_SESSION), body.get("session_epoch", FINAL_EPOCH)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return FetchContext(_request_topics(body), None, incremental=False)
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(session_id, None)
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
                session.update((t.topic, p.partition), _params(p))
        for t in body.get("forgotten_topics_data", ()):
            for index in t.partitions:
                session.forget((t.topic, index))
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        self._sessions.move_to_end(session_id)
        return FetchContext(session.view(), session, incremental=True)

    def _create(self, partitions: dict) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)
        session_id = next(self._ids)
        if session_id >= 2**31 - 1:
            self._ids = itertools.count(1)
            session_id = next(self._ids)
        session = FetchSession(session_id, 1, partitions)
        self._sessions[session_id] = session
        return session
