"""Share sessions (KIP-932's share session cache): what ShareFetch and ShareAcknowledge carry
between requests of one member of one share group, keyed by (group id, member id).

`ShareSessionEpoch` decides: 0 opens a session (replacing one the member had), -1 closes it
(after the request's acknowledgements), anything else must be the session's next epoch,
which each request then moves on by one. Errors (Kafka's): SHARE_SESSION_NOT_FOUND for an epoch
without a session, INVALID_SHARE_SESSION_EPOCH for a wrong one (and for ShareAcknowledge with
epoch 0, which cannot open a session), SHARE_SESSION_LIMIT_REACHED past `max_sessions`.

A session belongs to the client connection that opened it: when that connection closes, the
session ends (`disconnected`), as Kafka's `ShareSessionCache` does on a client disconnect, and
its member's records go back to the others at once rather than when their locks run out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, KafkaError
from protocol.topic_partition import TopicIdPartition

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
_MAX_EPOCH = (1 << 31) - 1


class ShareSessionError(KafkaError):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: set[TopicIdPartition] = field(default_factory=set)
    connection_id: str = ""  # the connection that opened it ("" none: it never ends with one)


@dataclass(frozen=True)
class SessionStep:
    """What a request does to its session: the session (for its partitions), the session it
    replaced when it opened one (its member's records go back), and whether it closes it."""

    session: ShareSession
    replaced: ShareSession | None = None
    closing: bool = False


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[str, set[tuple[str, str]]] = {}  # connection id -> session keys

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        connection_id: str = "",
    ) -> SessionStep:
        """ShareFetch's step (`connection_id`: the connection it came on, which owns a session
        it opens). Raises ShareSessionError."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            replaced = self.sessions.get(key)
            if replaced is None and len(self.sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED, "The share session cache is full.")
            session = self.sessions[key] = ShareSession(group_id, member_id, 1, set(added), connection_id)
            if connection_id:
                self._by_connection.setdefault(connection_id, set()).add(key)
            return SessionStep(session, replaced)
        session = self._current(key, epoch)
        session.partitions |= set(added)
        session.partitions -= set(forgotten)
        return self._step(key, session, epoch)

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> SessionStep:
        """ShareAcknowledge's step. Raises ShareSessionError."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session."
            )
        return self._step(key, self._current(key, epoch), epoch)

    def _current(self, key: tuple[str, str], epoch: int) -> ShareSession:
        session = self.sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"No share session for member {key[1]}.")
        if epoch != CLOSE_EPOCH and epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"Share session epoch {epoch}, expected {session.epoch}."
            )
        return session

    def disconnected(self, connection_id: str) -> list[ShareSession]:
        """The sessions `connection_id` opened and that are still open (not closed or reopened
        since), now ended."""
        ended = []
        for key in self._by_connection.pop(connection_id, ()):
            session = self.sessions.get(key)
            if session is not None and session.connection_id == connection_id:
                del self.sessions[key]
                ended.append(session)
        return ended

    def _step(self, key: tuple[str, str], session: ShareSession, epoch: int) -> SessionStep:
        if epoch == CLOSE_EPOCH:
            del self.sessions[key]
            owned = self._by_connection.get(session.connection_id)
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self._by_connection[session.connection_id]
            return SessionStep(session, closing=True)
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        return SessionStep(session)
