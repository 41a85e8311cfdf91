"""Settled partitions in a follower's fetch session (broker/fetch_sessions.py, issue 48): an idle,
caught-up partition is left out of the follower's later fetches until it changes, while the
leader still sees the follower caught up on it at every fetch, and within `SWEEP_MS` learns of
changes no notify announces. The replica manager without sockets, on a fake wall clock."""

import pytest
import trio
import trio.testing
from broker_helpers import leader_and_isr, replica_manager, session_fetch

import broker.partition
from broker.fetch_sessions import SWEEP_MS, FetchSessionCache
from broker.partition import Partition, ReplicaState
from protocol import record_batch as rb
from storage.append_origin import AppendOrigin

LAG_MS = 2 * SWEEP_MS  # replica.lag.time.max.ms in these tests: longer than a sweep


@pytest.fixture
def clock(monkeypatch):
    now = [1_000_000]
    monkeypatch.setattr(broker.partition, "now_ms", lambda: now[0])
    return now


@pytest.fixture
def rm(tmp_path):
    with replica_manager(tmp_path) as manager:
        yield manager


@pytest.fixture
def full_reads(monkeypatch):
    """How many times the leader recorded a follower's fetch of each partition one by one."""
    counts: dict = {}
    recorded = Partition.record_caught_up_fetch

    def counting(self, *args):
        counts[self.tp] = counts.get(self.tp, 0) + 1
        return recorded(self, *args)

    monkeypatch.setattr(Partition, "record_caught_up_fetch", counting)
    return counts


async def append(rm, index, values):
    entries = {("t", index): rb.build_batch([(None, v) for v in values])}
    return await rm.append_records_and_wait(entries, 1, 1000, AppendOrigin.CLIENT)


def answered(result):
    return {(topic, p.partition): p for topic, parts in result.topics for p in parts}


async def settled_session(rm, partitions=3):
    """A session of follower 2 over t-0..t-N, caught up (each holds one record) and settled."""
    keys = {("t", i): (1, [1, 2], [1, 2]) for i in range(partitions)}
    await rm.become_leader_or_follower(leader_and_isr(keys), 7)
    for index in range(partitions):
        await append(rm, index, [b"a"])
    session = (await rm.fetch(session_fetch(0, 0, [("t", i, 0) for i in range(partitions)]))).session_id
    await rm.fetch(session_fetch(session, 1, [("t", i, 1) for i in range(partitions)]))  # the HW moves
    assert answered(await rm.fetch(session_fetch(session, 2))) == {}  # caught up: each one settles
    return session


def follower_state(rm, index) -> ReplicaState:
    return rm.partitions[("t", index)].remote[2]


async def test_settled_partitions_are_not_read_yet_keep_their_follower_in_the_isr(rm, clock, full_reads):
    session = await settled_session(rm)
    full_reads.clear()
    epoch = 3
    for _ in range(6):  # 6 fetches, 0.4 s apart: 2.4 s, longer than the lag allowed
        clock[0] += SWEEP_MS // 2 - 100
        assert answered(await rm.fetch(session_fetch(session, epoch))) == {}
        epoch += 1
        for index in range(3):
            assert follower_state(rm, index).caught_up_ms() == clock[0]
            assert rm.partitions[("t", index)].out_of_sync_replicas(LAG_MS, now=clock[0] + 100) == []
    # one full read per SWEEP_MS, not one per fetch
    assert set(full_reads) == {("t", 0), ("t", 1), ("t", 2)}
    assert all(n <= 3 for n in full_reads.values()), full_reads
    # the follower stops fetching: the lag shows once replica.lag.time.max.ms passes
    last = clock[0]
    assert rm.partitions[("t", 1)].out_of_sync_replicas(LAG_MS, now=last + LAG_MS) == []
    assert rm.partitions[("t", 1)].out_of_sync_replicas(LAG_MS, now=last + LAG_MS + 1) == [2]


async def test_an_append_makes_a_settled_partition_active_with_its_last_fetch_kept(rm, clock):
    session = await settled_session(rm)
    clock[0] += 300
    await rm.fetch(session_fetch(session, 3))
    fetched_at = clock[0]
    clock[0] += 200
    await append(rm, 1, [b"b"])
    state = follower_state(rm, 1)
    # Kafka's rule from here on needs the follower's last fetch time and the LEO it was at then
    assert (state.clock, state.last_fetch_ms, state.last_caught_up_ms) == (None, fetched_at, fetched_at)
    assert state.last_fetch_leader_leo == 1
    clock[0] += 100
    news = answered(await rm.fetch(session_fetch(session, 4)))
    assert list(news) == [("t", 1)] and rb.decode_records(news[("t", 1)].records)[0].value == b"b"
    # the follower has not reached the new LEO yet, but it was caught up at its previous fetch
    assert follower_state(rm, 1).caught_up_ms() == fetched_at
    assert follower_state(rm, 0).caught_up_ms() == clock[0]


async def test_a_waiting_fetch_of_settled_partitions_is_answered_by_an_append(rm, clock, autojump_clock):
    session = await settled_session(rm)
    results: list = []

    async def waiting_fetch():
        body = session_fetch(session, 3)
        body.max_wait_ms = 10_000
        started = trio.current_time()
        results.append((await rm.fetch(body), trio.current_time() - started))

    (follower_session,) = rm.fetch_sessions._sessions.values()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch)
        await trio.testing.wait_all_tasks_blocked()
        assert not results and follower_session.waiting == 1  # the notify wakes it through its session
        await append(rm, 2, [b"c"])
    result, waited = results[0]
    assert list(answered(result)) == [("t", 2)] and waited < 1
    assert follower_session.waiting == 0


async def test_a_log_start_move_no_notify_announces_reaches_the_follower_within_a_sweep(rm, clock):
    session = await settled_session(rm)
    await append(rm, 0, [b"b"])  # t-0 holds two records; the follower fetches the second
    await rm.fetch(session_fetch(session, 3, [("t", 0, 2)]))
    assert answered(await rm.fetch(session_fetch(session, 4))) == {}
    # retention raises the log start offset and tells nobody
    rm.partitions[("t", 0)].log.maybe_increment_log_start_offset(1)
    clock[0] += SWEEP_MS - 1
    assert answered(await rm.fetch(session_fetch(session, 5))) == {}
    clock[0] += 1
    news = answered(await rm.fetch(session_fetch(session, 6)))
    assert list(news) == [("t", 0)] and news[("t", 0)].log_start_offset == 1


async def test_delete_records_announces_its_log_start_move_at_once(rm, clock):
    session = await settled_session(rm)
    partition = rm.partitions[("t", 2)]
    partition.delete_records_on_leader(1)
    rm.partition_changed(("t", 2))  # as broker/delete_records.py does
    news = answered(await rm.fetch(session_fetch(session, 3)))
    assert list(news) == [("t", 2)] and news[("t", 2)].log_start_offset == 1


async def test_an_isr_change_makes_a_settled_partition_active(rm, clock):
    await settled_session(rm)
    shrunk = {("t", 0): (1, [1, 2], [1]), ("t", 1): (1, [1, 2], [1, 2]), ("t", 2): (1, [1, 2], [1, 2])}
    await rm.become_leader_or_follower(leader_and_isr(shrunk, leader_epoch=1), 7)
    cache = rm.fetch_sessions
    assert all(("t", i) not in s.settled for s in cache._sessions.values() for i in range(3))


def test_a_closed_replaced_or_evicted_session_leaves_its_follower_states_stamped_and_free():
    cache = FetchSessionCache(max_slots=1)
    first = cache.context(session_fetch(0, 0, [("t", 0, 5)])).session
    assert first is not None
    cache.follower_view(first, 2, 1_000)
    state = ReplicaState(log_end_offset=5, last_caught_up_ms=900, last_fetch_ms=900)
    first.settle(("t", 0), state)
    cache.follower_view(first, 2, 1_400)
    assert (state.caught_up_ms(), state.last_caught_up_ms) == (1_400, 900)
    second = cache.context(session_fetch(0, 0, [("t", 0, 5)])).session  # evicts the first (one slot)
    assert second is not first
    assert (state.clock, state.last_caught_up_ms, state.last_fetch_ms) == (None, 1_400, 1_400)
    assert list(cache.changed(("t", 0))) == []  # the evicted session is out of the index

    cache.follower_view(second, 2, 2_000)
    second.settle(("t", 0), state)
    other = ReplicaState()
    assert list(cache.changed(("t", 0))) == [second] and state.clock is None and ("t", 0) not in second.settled
    second.settle(("t", 0), other)
    cache.follower_view(second, 3, 2_500)  # another replica uses the session: nothing stays settled
    assert other.clock is None and other.last_caught_up_ms == 2_000 and not second.settled
