"""Share sessions (KIP-932): epoch 0 opens (replacing a member's old session), -1 closes, any other
epoch must be the next one, and each error is Kafka's."""

import uuid

import pytest

from broker.share.share_sessions import ShareSessionCache, ShareSessionError
from protocol.errors import ErrorCode as E

T = uuid.UUID(int=3)


def error_of(call) -> E:
    with pytest.raises(ShareSessionError) as e:
        call()
    return e.value.error_code


def test_a_session_opens_moves_on_by_one_and_closes():
    cache = ShareSessionCache()
    opened = cache.fetch("g", "m", 0, [(T, 0), (T, 1)], [])
    assert opened.replaced is None and opened.session.partitions == {(T, 0), (T, 1)}
    step = cache.fetch("g", "m", 1, [(T, 2)], [(T, 0)])
    assert step.session.partitions == {(T, 1), (T, 2)} and step.session.epoch == 2
    assert cache.acknowledge("g", "m", 2).session.epoch == 3
    assert error_of(lambda: cache.fetch("g", "m", 2, [], [])) == E.INVALID_SHARE_SESSION_EPOCH
    closed = cache.acknowledge("g", "m", -1)
    assert closed.closing and ("g", "m") not in cache.sessions
    assert error_of(lambda: cache.fetch("g", "m", 4, [], [])) == E.SHARE_SESSION_NOT_FOUND


def test_a_new_session_replaces_the_old_and_the_cache_is_bounded():
    cache = ShareSessionCache(max_sessions=1)
    first = cache.fetch("g", "m", 0, [(T, 0)], []).session
    again = cache.fetch("g", "m", 0, [(T, 1)], [])
    assert again.replaced is first and again.session.partitions == {(T, 1)}
    assert error_of(lambda: cache.fetch("g", "other", 0, [], [])) == E.SHARE_SESSION_LIMIT_REACHED
    assert error_of(lambda: cache.acknowledge("g", "m", 0)) == E.INVALID_SHARE_SESSION_EPOCH


def test_a_session_ends_with_the_connection_that_opened_it():
    cache = ShareSessionCache()
    mine = cache.fetch("g", "m", 0, [(T, 0)], [], "conn-1").session
    cache.fetch("g", "m", 1, [], [], "conn-2")  # a later request on another connection: still conn-1's
    cache.fetch("g", "other", 0, [(T, 0)], [], "conn-1")
    cache.fetch("g", "other", 1, [], [], "conn-1")
    cache.fetch("g", "other", -1, [], [], "conn-1")  # closed before the connection: not ended twice
    cache.fetch("g", "moved", 0, [], [], "conn-1")
    moved = cache.fetch("g", "moved", 0, [], [], "conn-3").session  # reopened elsewhere: conn-3's now
    assert cache.disconnected("conn-2") == []
    assert cache.disconnected("conn-1") == [mine]
    assert set(cache.sessions) == {("g", "moved")} and cache.sessions[("g", "moved")] is moved
    assert cache.disconnected("conn-1") == []
    assert cache.disconnected("conn-3") == [moved] and not cache.sessions
