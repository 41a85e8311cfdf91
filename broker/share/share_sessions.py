"""Share sessions (KIP-932's share session cache): what ShareFetch and ShareAcknowledge carry
between requests of one member of one share group, keyed by (group id, member id).

`ShareSessionEpoch` decides: 0 opens a session (replacing one the member had), -1 closes it
(after the request's acknowledgements), anything else must be the session's next epoch,
which each request then moves on by one. Errors (Kafka's): SHARE_SESSION_NOT_FOUND for an epoch
without a session, INVALID_SHARE_SESSION_EPOCH for a wrong one (and for ShareAcknowledge with
epoch 0, which cannot open a session), SHARE_SESSION_LIMIT_REACHED past `max_sessions`.
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

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
    ) -> SessionStep:
        """ShareFetch's step. Raises ShareSessionError."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            replaced = self.sessions.get(key)
            if replaced is None and len(self.sessions) >= self.max_sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED, "The share session cache is full.")
            session = self.sessions[key] = ShareSession(group_id, member_id, 1, set(added))
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

    def _step(self, key: tuple[str, str], session: ShareSession, epoch: int) -> SessionStep:
        if epoch == CLOSE_EPOCH:
            del self.sessions[key]
            return SessionStep(session, closing=True)
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        return SessionStep(session)
