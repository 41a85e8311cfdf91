"""The Produce appends of one loop turn (issue 48, `broker/client_appends.py`), through the replica
manager with its end-of-turn task running: real logs in a temp dir, no sockets. Requests for a
partition made in one task step are written together at the end of the turn, each answered with
its own offsets or its own error; an append that does not wait for the turn writes what waits
first; acks=-1 still waits for the high watermark; without the task, appends are made at once."""

import trio
import trio.testing
from broker_helpers import follower_fetch, leader_and_isr, replica_manager

from protocol import record_batch as rb
from protocol.errors import ErrorCode
from storage.append_origin import AppendOrigin

A, B = ("t", 0), ("t", 1)


def _batch(value: bytes, producer_id: int = -1, sequence: int = -1) -> bytes:
    return rb.build_batch([(None, value)], producer_id=producer_id, producer_epoch=0, base_sequence=sequence)


def _writes(rm, tp, monkeypatch) -> list:
    """Every write to `tp`'s active segment, as its number of buffers."""
    segment = rm.partitions[tp].log.active_segment
    original, writes = segment.append, []
    monkeypatch.setattr(segment, "append", lambda buffers, *a: (writes.append(len(buffers)), original(buffers, *a)))
    return writes


async def _running(rm, nursery):
    await nursery.start(rm.turn_end.run)
    await nursery.start(rm.delayed_timer.run)


def _summary(results):
    return {
        tp: (r.error, None if r.info is None else (r.info.first_offset, r.info.last_offset))
        for tp, r in results.items()
    }


async def test_requests_of_one_turn_are_written_once_per_partition_each_with_its_own_outcome(tmp_path, monkeypatch):
    with replica_manager(tmp_path) as rm:
        await rm.become_leader_or_follower(leader_and_isr({A: (1, [1], [1]), B: (1, [1], [1])}), 7)
        writes_a, writes_b = _writes(rm, A, monkeypatch), _writes(rm, B, monkeypatch)
        answers: dict[int, dict] = {}
        async with trio.open_nursery() as nursery:
            await _running(rm, nursery)
            corrupt = bytearray(_batch(b"bad"))
            corrupt[-1] ^= 0xFF
            requests = [
                {A: _batch(b"a0", 5, 0)},
                {A: _batch(b"a1"), B: _batch(b"b0")},
                {A: bytes(corrupt)},
                {A: _batch(b"a2", 6, 0), ("t", 9): _batch(b"nowhere")},
                {("__consumer_offsets", 0): _batch(b"internal")},
            ]
            for i, entries in enumerate(requests):  # one task step: one loop turn
                rm.append_records_soon(entries, 1, 1000, lambda results, i=i: answers.__setitem__(i, results))
            assert answers == {4: answers.get(4)} and len(rm.client_appends) == 5  # refused at once; the rest wait
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert _summary(answers[0]) == {A: (ErrorCode.NONE, (0, 0))}
        assert _summary(answers[1]) == {A: (ErrorCode.NONE, (1, 1)), B: (ErrorCode.NONE, (0, 0))}
        assert _summary(answers[2]) == {A: (ErrorCode.CORRUPT_MESSAGE, None)}
        assert _summary(answers[3]) == {
            A: (ErrorCode.NONE, (2, 2)),
            ("t", 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
        }
        assert list(answers[1]) == [A, B] and list(answers[3]) == [A, ("t", 9)]  # in request order
        assert answers[4][("__consumer_offsets", 0)].error == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert writes_a == [6] and writes_b == [2]  # one write each: 3 batches to A, 1 to B
        assert rm.partitions[A].log_end_offset == 3 and rm.topic_stats.messages_in["t"] == 4


async def test_an_append_that_does_not_wait_writes_what_waits_for_its_partition_first(tmp_path):
    with replica_manager(tmp_path) as rm:
        await rm.become_leader_or_follower(leader_and_isr({A: (1, [1], [1])}), 7)
        answers = []
        async with trio.open_nursery() as nursery:
            await _running(rm, nursery)
            rm.append_records_soon({A: _batch(b"first")}, 1, 1000, answers.append)
            direct = rm.append_records({A: _batch(b"second")}, 1, 1000, AppendOrigin.COORDINATOR)
            assert direct[A].info.first_offset == 1  # after the waiting one, which was written first
            assert answers[0][A].info.first_offset == 0 and len(rm.client_appends) == 0
            nursery.cancel_scope.cancel()


async def test_acks_all_waits_for_the_high_watermark_and_a_short_isr_refuses_only_acks_all(tmp_path):
    with replica_manager(tmp_path) as rm:
        await rm.become_leader_or_follower(leader_and_isr({A: (1, [1, 2], [1, 2])}), 7)
        answers: dict[str, dict] = {}
        async with trio.open_nursery() as nursery:
            await _running(rm, nursery)
            rm.append_records_soon({A: _batch(b"all")}, -1, 5000, lambda r: answers.__setitem__("all", r))
            rm.append_records_soon({A: _batch(b"one")}, 1, 5000, lambda r: answers.__setitem__("one", r))
            await trio.testing.wait_all_tasks_blocked()
            assert list(answers) == ["one"]  # acks=-1 waits for the follower
            await rm.fetch(follower_fetch("t", 0, 2))  # the follower has both: the HW covers them
            await trio.testing.wait_all_tasks_blocked()
            assert answers["all"][A].error == ErrorCode.NONE and answers["all"][A].info.first_offset == 0
            # the ISR shrinks below min.insync.replicas (2): acks=-1 refused, acks=1 appended, in one turn
            await rm.become_leader_or_follower(leader_and_isr({A: (1, [1], [1, 2])}, leader_epoch=1), 7)
            rm.append_records_soon({A: _batch(b"all")}, -1, 5000, lambda r: answers.__setitem__("short", r))
            rm.append_records_soon({A: _batch(b"one")}, 1, 5000, lambda r: answers.__setitem__("one", r))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert answers["short"][A].error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert answers["one"][A].error == ErrorCode.NONE and answers["one"][A].info.first_offset == 2


async def test_leadership_lost_during_the_turn_refuses_what_waits(tmp_path):
    with replica_manager(tmp_path) as rm:
        await rm.become_leader_or_follower(leader_and_isr({A: (1, [1], [1])}), 7)
        answers = []
        async with trio.open_nursery() as nursery:
            await _running(rm, nursery)
            rm.append_records_soon({A: _batch(b"late")}, 1, 1000, answers.append)
            rm.partitions[A].leader_id = 2  # as a LeaderAndIsr making broker 2 the leader would
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert answers[0][A].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert rm.partitions[A].log_end_offset == 0


async def test_without_the_turns_task_appends_are_made_at_once(tmp_path):
    with replica_manager(tmp_path) as rm:
        await rm.become_leader_or_follower(leader_and_isr({A: (1, [1], [1])}), 7)
        answers = []
        rm.append_records_soon({A: _batch(b"now")}, 1, 1000, answers.append)
        assert answers[0][A].info.first_offset == 0 and rm.partitions[A].log_end_offset == 1
