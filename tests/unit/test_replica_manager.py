"""The replica manager without sockets: LeaderAndIsr rules, produce with acks, fetch long polling,
ListOffsets, StopReplica (real logs in a temp dir; timeouts on trio's autojump clock)."""

import pytest
import trio
import trio.testing
from broker_helpers import decoded, follower_fetch, leader_and_isr, replica_manager, session_fetch

from broker.handlers.controller_requests import leader_and_isr_response
from broker.handlers.list_offsets import partition_body as list_offsets_partition
from protocol import record_batch as rb
from protocol.errors import ErrorCode
from storage.append_origin import AppendOrigin


@pytest.fixture
def rm(tmp_path):
    with replica_manager(tmp_path) as manager:
        yield manager


def produce(topic, index, values):
    """A client append's entries: one batch of `values` for `topic`-`index`."""
    return {(topic, index): rb.build_batch([(None, v) for v in values])}


async def append(rm, entries, acks, timeout_ms=1000):
    return await rm.append_records_and_wait(entries, acks, timeout_ms, AppendOrigin.CLIENT)


def errors(response):
    return {
        (t["topic_id"] if "topic_id" in t else None, p["partition_index"]): p["error_code"]
        for t in response["topics"]
        for p in t["partition_errors"]
    }


def response(result, version=7):
    """The LeaderAndIsr response the handler builds from the replica manager's result."""
    return leader_and_isr_response(version, result.error, result.partitions)


async def test_leader_and_isr_epochs(rm):
    r = await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1], [1]), ("t", 1): (2, [2, 1], [2, 1]), ("t", 2): (2, [2], [2])}), 7
    )
    assert sorted(errors(response(r)).values()) == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert rm.partitions[("t", 0)].is_leader and not rm.partitions[("t", 1)].is_leader
    # the same leader epoch again is stale, per partition
    r = await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}), 7)
    assert list(errors(response(r)).values()) == [ErrorCode.STALE_CONTROLLER_EPOCH]
    # a newer controller epoch moves the bar; an older one is refused whole
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}, controller_epoch=5, leader_epoch=1), 7)
    r = await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1], [1])}, controller_epoch=4, leader_epoch=9), 7
    )
    assert r.error == ErrorCode.STALE_CONTROLLER_EPOCH and rm.partitions[("t", 0)].leader_epoch == 1
    # v2-4 answer with partition_errors
    r = await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1], [1])}, controller_epoch=5, leader_epoch=2, version=2), 2
    )
    assert response(r, 2)["partition_errors"] == [{"topic_name": "t", "partition_index": 0, "error_code": 0}]
    rm.broker_epoch = 100
    r = await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1], [1])}, controller_epoch=5, leader_epoch=3, broker_epoch=99), 7
    )
    assert r.error == ErrorCode.STALE_BROKER_EPOCH


async def test_acks_all_waits_for_the_isr_then_times_out_or_succeeds(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1, 2], [1, 2])}), 7)
    partition = rm.partitions[("t", 0)]
    # nobody fetches: REQUEST_TIMED_OUT after timeout_ms, though the leader appended
    start = trio.current_time()
    r = await append(rm, produce("t", 0, [b"a", b"b"]), -1, 1000)
    assert r[("t", 0)].error == ErrorCode.REQUEST_TIMED_OUT
    assert trio.current_time() - start == pytest.approx(1.0)
    assert partition.log_end_offset == 2 and partition.high_watermark == 0
    # the follower fetches at its LEO: the HW moves and the waiting produce completes
    async with trio.open_nursery() as nursery:
        result = []

        async def produce_all():
            result.append(await append(rm, produce("t", 0, [b"c"]), -1, 5000))

        nursery.start_soon(produce_all)
        await trio.sleep(0.5)
        fetch_request = follower_fetch("t", 0, 3)
        await rm.fetch(fetch_request)
    assert result[0][("t", 0)].error == ErrorCode.NONE
    assert partition.high_watermark == 3
    # acks=1 does not wait; an ISR below min.insync.replicas refuses acks=-1 up front
    assert (await append(rm, produce("t", 0, [b"d"]), 1, 1000))[("t", 0)].error == ErrorCode.NONE
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1, 2])}, leader_epoch=1), 7)
    r = await append(rm, produce("t", 0, [b"e"]), -1, 1000)
    assert r[("t", 0)].error == ErrorCode.NOT_ENOUGH_REPLICAS


async def test_delayed_produce_completes_without_a_task_when_every_partition_is_covered(rm, autojump_clock):
    """An acks=-1 produce to two partitions returns a DelayedResponse at once (Kafka's
    DelayedProduce); the follower fetch that covers the first partition does not complete it, the
    one that covers the second does; one whose follower never fetches times out on the timer."""
    from broker.delayed import DelayedResponse

    await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1, 2], [1, 2]), ("t", 1): (1, [1, 2], [1, 2])}), 7
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(rm.delayed_timer.run)
        entries = produce("t", 0, [b"a"]) | produce("t", 1, [b"b", b"c"])
        delayed = rm.append_records(entries, -1, 1000, AppendOrigin.CLIENT)
        assert isinstance(delayed, DelayedResponse)
        answered: list = []
        delayed.on_complete(answered.append)
        await rm.fetch(follower_fetch("t", 0, 1))
        assert answered == [] and rm.partitions[("t", 0)].high_watermark == 1
        await rm.fetch(follower_fetch("t", 1, 2))
        assert [(tp, r.error, r.info.first_offset) for tp, r in answered[0].items()] == [
            (("t", 0), ErrorCode.NONE, 0),
            (("t", 1), ErrorCode.NONE, 0),
        ]
        start = trio.current_time()
        late = rm.append_records(produce("t", 0, [b"d"]), -1, 1000, AppendOrigin.CLIENT)
        assert isinstance(late, DelayedResponse)
        body = await late.wait()
        assert trio.current_time() - start == pytest.approx(1.0)
        assert body[("t", 0)].error == ErrorCode.REQUEST_TIMED_OUT
        assert len(rm.delayed_timer) == 0 and len(rm.replication_waiters) == 0
        nursery.cancel_scope.cancel()


async def test_consumer_fetch_reads_to_the_hw_and_long_polls(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}), 7)
    await append(rm, produce("t", 0, [b"a", b"b"]), 1, 1000)

    def fetch(offset, max_wait_ms=0, min_bytes=1):
        return rm.fetch(
            decoded(
                1,
                12,
                {
                    "replica_id": -1,
                    "max_wait_ms": max_wait_ms,
                    "min_bytes": min_bytes,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic": "t",
                            "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
                        }
                    ],
                },
            )
        )

    r = (await fetch(0)).topics[0][1][0]
    assert [x.value for x in rb.decode_records(r.records)] == [b"a", b"b"] and r.high_watermark == 2
    start = trio.current_time()
    r = (await fetch(2, max_wait_ms=700)).topics[0][1][0]
    assert r.records == b"" and trio.current_time() - start == pytest.approx(0.7)
    async with trio.open_nursery() as nursery:
        got = []

        async def poll():
            got.append((await fetch(2, max_wait_ms=10_000)).topics[0][1][0])

        nursery.start_soon(poll)
        await trio.sleep(1)
        await append(rm, produce("t", 0, [b"c"]), 1, 1000)
    assert [x.value for x in rb.decode_records(got[0].records)] == [b"c"]
    assert trio.current_time() - start == pytest.approx(1.7)


async def test_list_offsets(rm):
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}), 7)
    log = rm.partitions[("t", 0)].log
    for _i, ts in enumerate([1000, 5000, 3000]):
        log.append_as_leader(rb.build_batch([(None, b"x", [], ts)]), 0)
    rm.partitions[("t", 0)].maybe_increment_high_watermark()

    def lookup(ts, version=7):
        body = decoded(
            2,
            version,
            {
                "replica_id": -1,
                "topics": [
                    {"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1}]}
                ],
            },
        )
        return rm.list_offsets(body, version)[0][1][0]

    assert (lookup(-2).offset, lookup(-1).offset, lookup(-1).leader_epoch) == (0, 3, 0)
    assert (lookup(-3).offset, lookup(-3).timestamp) == (1, 5000)
    assert (lookup(2000).offset, lookup(2000).timestamp) == (1, 5000)
    assert lookup(9999).offset == -1
    # the handler builds each version: v1-3 have no leader epoch, left at its default
    assert list_offsets_partition(lookup(-1, version=1), 1)["leader_epoch"] == -1
    assert list_offsets_partition(lookup(-1), 4)["leader_epoch"] == 0


async def test_stop_replica_with_and_without_delete(rm):
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1]), ("t", 1): (1, [1], [1])}), 7)
    body = decoded(
        5,
        4,
        {
            "controller_id": 9,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": "t",
                    "partition_states": [
                        {"partition_index": 0, "leader_epoch": 0, "delete_partition": True},
                        {"partition_index": 1, "leader_epoch": 0, "delete_partition": False},
                    ],
                }
            ],
        },
    )
    directory = rm.partitions[("t", 0)].log.dir
    r = rm.stop_replicas(body, 4)
    assert [code for _, _, code in r.partitions] == [0, 0] and not rm.partitions
    assert not directory.exists() and rm.log_manager.get_log(("t", 1)) is not None


async def test_fetch_byte_limits(rm):
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1]), ("t", 1): (1, [1], [1])}), 7)
    for index in (0, 1):
        for _i in range(5):
            await append(rm, produce("t", index, [b"x" * 1000]), 1, 1000)
    size = len(rb.build_batch([(None, b"x" * 1000)]))

    async def fetch(max_bytes, partition_max_bytes):
        body = decoded(
            1,
            12,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": max_bytes,
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [
                            {"partition": i, "fetch_offset": 0, "partition_max_bytes": partition_max_bytes}
                            for i in (0, 1)
                        ],
                    }
                ],
            },
        )
        parts = (await rm.fetch(body)).topics[0][1]
        return [len(p.records) // size for p in parts]

    assert await fetch(1 << 20, 2 * size) == [2, 2]  # partition_max_bytes per partition
    assert await fetch(3 * size, 1 << 20) == [3, 0]  # max_bytes for the whole response
    assert await fetch(10, 10) == [1, 0]  # the first batch even when larger (KIP-74)


async def test_a_new_leader_behind_on_its_hw_answers_offset_not_available(rm):
    # this replica followed with a stale HW, then leads with followers that have not fetched yet
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (2, [2, 1], [2, 1])}), 7)
    partition = rm.partitions[("t", 0)]
    partition.log.append_as_follower(rb.build_batch([(None, b"a"), (None, b"b")], partition_leader_epoch=0))
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1, 2], [1, 2])}, leader_epoch=1), 7)
    assert partition.high_watermark == 0 and partition.epoch_start_offset == 2
    fetch = decoded(
        1,
        12,
        {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1000,
            "topics": [
                {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}
            ],
        },
    )
    r = (await rm.fetch(fetch)).topics[0][1][0]
    assert r.error_code == ErrorCode.OFFSET_NOT_AVAILABLE and r.high_watermark == -1
    body = decoded(
        2, 7, {"replica_id": -1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    )
    assert rm.list_offsets(body, 7)[0][1][0].error_code == ErrorCode.OFFSET_NOT_AVAILABLE
    # the follower fetches at the new leader's LEO: HW reaches the epoch start, consumers are served
    await rm.fetch(
        decoded(
            1,
            12,
            {
                "replica_id": 2,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1000,
                "topics": [
                    {
                        "topic": "t",
                        "partitions": [
                            {"partition": 0, "fetch_offset": 2, "partition_max_bytes": 1000, "current_leader_epoch": 1}
                        ],
                    }
                ],
            },
        )
    )
    r = (await rm.fetch(fetch)).topics[0][1][0]
    assert r.error_code == 0 and r.high_watermark == 2


def answered(result):
    return {(topic, p.partition): p for topic, parts in result.topics for p in parts}


async def test_a_caught_up_follower_keeps_its_isr_place_on_partitions_its_session_leaves_out(rm, monkeypatch):
    import broker.partition

    clock = [1_000_000]
    monkeypatch.setattr(broker.partition, "now_ms", lambda: clock[0])
    await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1, 2], [1, 2]), ("t", 1): (1, [1, 2], [1, 2])}), 7
    )
    for index in (0, 1):
        await append(rm, produce("t", index, [b"a", b"b"]), 1, 1000)
    full = await rm.fetch(session_fetch(0, 0, [("t", 0, 0), ("t", 1, 0)]))
    session = full.session_id
    assert session and set(answered(full)) == {("t", 0), ("t", 1)}
    caught_up = await rm.fetch(session_fetch(session, 1, [("t", 0, 2), ("t", 1, 2)]))  # the HW moves: answered
    assert {tp: p.high_watermark for tp, p in answered(caught_up).items()} == {("t", 0): 2, ("t", 1): 2}
    clock[0] += 5_000
    quiet = await rm.fetch(session_fetch(session, 2))  # nothing new anywhere: an empty answer
    assert quiet.error_code == ErrorCode.NONE and answered(quiet) == {}
    for index in (0, 1):  # yet the leader saw the follower caught up on both, now
        assert rm.partitions[("t", index)].remote[2].last_caught_up_ms == clock[0]
        assert rm.partitions[("t", index)].out_of_sync_replicas(1_000, now=clock[0] + 500) == []
    await append(rm, produce("t", 1, [b"c"]), 1, 1000)
    news = answered(await rm.fetch(session_fetch(session, 3)))
    assert list(news) == [("t", 1)] and rb.decode_records(news[("t", 1)].records)[0].value == b"c"
    # a fenced epoch is still an error on the quick path's partitions
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1, 2], [1, 2])}, leader_epoch=1), 7)
    body = session_fetch(session, 4, [("t", 0, 2)])
    body.topics[0].partitions[0]["current_leader_epoch"] = 0
    assert answered(await rm.fetch(body))[("t", 0)].error_code == ErrorCode.FENCED_LEADER_EPOCH


def test_a_partition_the_cluster_has_elsewhere_answers_not_leader_or_follower(rm):
    """Kafka's getPartitionOrError: a partition this broker does not host answers
    NOT_LEADER_OR_FOLLOWER when the metadata cache knows it (clients refresh their metadata and
    retry; e.g. right after a reassignment moved it away), UNKNOWN_TOPIC_OR_PARTITION otherwise."""
    from broker.errors import NotLeaderOrFollower, UnknownTopicOrPartition
    from broker.metadata_cache import PartitionState

    with pytest.raises(UnknownTopicOrPartition):
        rm.get_partition("moved", 0)
    rm.metadata_cache.partitions["moved"] = {0: PartitionState("moved", 0, 2, 1, (2, 3), (2, 3), (), 0, 1)}
    with pytest.raises(NotLeaderOrFollower):
        rm.get_partition("moved", 0)
    with pytest.raises(UnknownTopicOrPartition):
        rm.get_partition("moved", 1)


async def test_a_verified_append_carries_the_guard_taken_before_the_question(rm):
    """KIP-890: the guard a Produce's verification started under is the one its append carries; a
    guard voided meanwhile (an abort marker, then another request's verification) fails the append
    with INVALID_TXN_STATE, though the producer has a current guard again."""
    await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}), 7)

    def txn_entries(seq):
        batch = rb.build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0, base_sequence=seq, transactional=True)
        return {("t", 0): batch}

    asked = rm.transactions_to_verify(txn_entries(0))
    assert list(asked) == [("t", 0)] and asked[("t", 0)][:2] == (7, 0)
    state = rm.partitions[("t", 0)].log.producer_state
    state.verifications.pop(7)  # what the ABORT marker does while the coordinator is asked
    state.maybe_start_verification(7)  # and a later request's verification
    guards = {tp: {pid: guard} for tp, (pid, _, guard) in asked.items()}
    result = rm.append_records(txn_entries(0), 1, 1000, AppendOrigin.CLIENT, guards)
    assert isinstance(result, dict)
    assert result[("t", 0)].error == ErrorCode.INVALID_TXN_STATE
    fresh = rm.transactions_to_verify(txn_entries(0))
    guards = {tp: {pid: guard} for tp, (pid, _, guard) in fresh.items()}
    result = rm.append_records(txn_entries(0), 1, 1000, AppendOrigin.CLIENT, guards)
    assert isinstance(result, dict)
    assert result[("t", 0)].error == ErrorCode.NONE
    assert rm.transactions_to_verify(txn_entries(1)) == {}  # open now: no more questions


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"current_leader_epoch": 0}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"current_leader_epoch": -2}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"current_leader_epoch": 5}, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ({"fetch_offset": 3}, ErrorCode.OFFSET_OUT_OF_RANGE),  # above the LEO (2)
        ({"replica_id": 1}, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # the leader itself
        ({"replica_id": 3}, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # not an assigned replica
        ({"partition": 1}, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # led by broker 2
        ({"partition": 7}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({}, ErrorCode.NONE),
        ({"current_leader_epoch": 1}, ErrorCode.NONE),
    ],
)
async def test_a_follower_fetch_that_fails_a_check_answers_its_error_and_records_nothing(rm, change, code):
    """The follower read's quick path (`ReplicaManager._follower_read`) gives every check's
    failure to the full path: the same error codes, and the follower's fetch state untouched."""
    await rm.become_leader_or_follower(
        leader_and_isr({("t", 0): (1, [1, 2], [1, 2]), ("t", 1): (2, [2, 1], [2, 1])}, leader_epoch=1), 7
    )
    await append(rm, produce("t", 0, [b"a", b"b"]), 1, 1000)
    body = follower_fetch("t", change.get("partition", 0), change.get("fetch_offset", 1), change.get("replica_id", 2))
    if "current_leader_epoch" in change:
        body.topics[0].partitions[0]["current_leader_epoch"] = change["current_leader_epoch"]
    (entry,) = answered(await rm.fetch(body)).values()
    assert entry.error_code == code
    remote = rm.partitions[("t", 0)].remote[2]
    if code == ErrorCode.NONE:
        assert remote.log_end_offset == 1 and [r.offset for r in rb.decode_records(entry.records)] == [0, 1]
        assert (entry.high_watermark, entry.log_start_offset) == (1, 0)
    else:
        assert remote.log_end_offset in (-1, 0) and entry.records == b""


async def test_a_delayed_session_fetch_answers_only_what_changed_and_errors_of_a_lost_replica(rm):
    """The re-read of a waiting incremental follower fetch leaves out its idle partitions, and
    still answers an error for a partition the follower stopped being a replica of meanwhile."""
    both = {("t", 0): (1, [1, 2], [1, 2]), ("t", 1): (1, [1, 2], [1, 2])}
    await rm.become_leader_or_follower(leader_and_isr(both), 7)
    for index in (0, 1):
        await append(rm, produce("t", index, [b"a"]), 1, 1000)
    session = (await rm.fetch(session_fetch(0, 0, [("t", 0, 0), ("t", 1, 0)]))).session_id
    await rm.fetch(session_fetch(session, 1, [("t", 0, 1), ("t", 1, 1)]))  # caught up: the HW moves
    assert answered(await rm.fetch(session_fetch(session, 2))) == {}  # nothing new anywhere

    async def waiting_fetch(epoch: int, results: list, parts=()) -> None:
        body = session_fetch(session, epoch, parts)
        body.max_wait_ms = 10_000
        results.append(await rm.fetch(body))

    results: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch, 3, results)
        await trio.testing.wait_all_tasks_blocked()
        assert not results
        await append(rm, produce("t", 1, [b"b"]), 1, 1000)
    news = answered(results[0])
    assert list(news) == [("t", 1)] and rb.decode_records(news[("t", 1)].records)[0].value == b"b"

    results.clear()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting_fetch, 4, results, [("t", 1, 2)])  # it has the record b now
        await trio.testing.wait_all_tasks_blocked()
        # t-0 moves to replicas 1 and 3 while the fetch waits (the same leader epoch, as a reassignment's)
        moved = {("t", 0): (1, [1, 3], [1, 3]), ("t", 1): (1, [1, 2], [1, 2])}
        await rm.become_leader_or_follower(leader_and_isr(moved, leader_epoch=1), 7)  # wakes the fetch
    news = answered(results[0])
    assert news[("t", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, news
