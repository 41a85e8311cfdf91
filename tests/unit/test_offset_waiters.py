"""`broker.delayed.OffsetWaiters`: acks=-1 produces wait for a partition's high watermark; a
notification wakes only the waiters whose offset was reached, in offset order, and finished
waiters do not pile up in the heap."""

import pytest
import trio

from broker.delayed import DelayedResponse, DelayedTimer, OffsetWaiters, Watchers

TP = ("t", 0)


async def test_only_the_waiters_whose_offset_was_reached_wake():
    waiters = OffsetWaiters(DelayedTimer())
    hw = {"value": 0}
    woken: list[int] = []
    checks = {"count": 0}

    def reached(offset: int) -> bool:
        checks["count"] += 1
        return hw["value"] >= offset

    async def wait(offset: int) -> None:
        assert await waiters.wait_for({TP: offset}, lambda: reached(offset), 10)
        woken.append(offset)

    async with trio.open_nursery() as nursery:
        for offset in (30, 10, 20):
            nursery.start_soon(wait, offset)
        await trio.testing.wait_all_tasks_blocked()
        assert len(waiters) == 3
        checks["count"] = 0
        hw["value"] = 15
        waiters.notify(TP, 15)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [10] and len(waiters) == 2
        assert checks["count"] == 1  # the waiters for 20 and 30 were not woken to re-check
        hw["value"] = 30
        waiters.notify(TP, 30)
    assert sorted(woken) == [10, 20, 30]
    assert not waiters.waiting(TP)


async def test_notify_without_an_offset_wakes_every_waiter_to_recheck():
    waiters = OffsetWaiters(DelayedTimer())
    leader = {"is": True}
    results: list[bool] = []

    async def wait(offset: int) -> None:
        results.append(await waiters.wait_for({TP: offset}, lambda: not leader["is"], 10))

    async with trio.open_nursery() as nursery:
        for offset in (5, 6):
            nursery.start_soon(wait, offset)
        await trio.testing.wait_all_tasks_blocked()
        leader["is"] = False  # e.g. leadership moved: the outcome is no longer an offset
        waiters.notify(TP, None)
    assert results == [True, True]


async def test_timed_out_waiters_are_dropped_from_the_heap():
    waiters = OffsetWaiters(DelayedTimer())
    for _ in range(200):  # the HW never moves: each waiter times out
        assert not await waiters.wait_for({TP: 100}, lambda: False, 0)
    assert len(waiters) == 0
    assert len(waiters._heaps.get(TP, [])) < OffsetWaiters._COMPACT_AT


@pytest.mark.parametrize("reached", [None, 1000])
async def test_a_notify_after_timeouts_leaves_nothing_behind(reached):
    waiters = OffsetWaiters(DelayedTimer())
    for _ in range(10):
        await waiters.wait_for({TP: 5}, lambda: False, 0)
    waiters.notify(TP, reached)
    assert not waiters.waiting(TP) and waiters._dead == {}


async def test_the_timer_times_waiters_out_at_their_own_deadline(autojump_clock):
    """One DelayedTimer task serves every waiter's timeout; a waiter added with an earlier deadline
    than the one the timer sleeps until is still woken on time."""
    timer = DelayedTimer()
    waiters = OffsetWaiters(timer)
    watchers = Watchers(timer)
    ended: dict[str, float] = {}

    async def wait(name: str, timeout_s: float) -> None:
        if name.startswith("fetch"):
            assert not await watchers.wait_for([TP], lambda: False, timeout_s)
        else:
            assert not await waiters.wait_for({TP: 10}, lambda: False, timeout_s)
        ended[name] = trio.current_time()

    async with trio.open_nursery() as nursery:
        await nursery.start(timer.run)
        start = trio.current_time()
        nursery.start_soon(wait, "produce-30", 30.0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait, "fetch-0.5", 0.5)  # earlier than the timer's current sleep
        nursery.start_soon(wait, "produce-2", 2.0)
        await trio.sleep(31)
        nursery.cancel_scope.cancel()
    assert {k: round(v - start, 3) for k, v in ended.items()} == {
        "fetch-0.5": 0.5,
        "produce-2": 2.0,
        "produce-30": 30.0,
    }
    assert len(timer) == 0 and len(waiters) == 0 and len(watchers) == 0


async def test_answered_waiters_leave_no_deadlines_behind():
    timer = DelayedTimer()
    waiters = OffsetWaiters(timer)
    hw = {"value": 0}
    async with trio.open_nursery() as nursery:
        await nursery.start(timer.run)
        for offset in range(1, 3001):  # each answered long before its 30 s deadline

            async def wait(offset: int = offset) -> None:
                assert await waiters.wait_for({TP: offset}, lambda: hw["value"] >= offset, 30)

            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            hw["value"] = offset
            waiters.notify(TP, offset)
            await trio.testing.wait_all_tasks_blocked()
        assert len(timer) == 0
        assert len(timer._heap) <= 2 * 1024 + 2  # discarded entries are rebuilt away
        nursery.cancel_scope.cancel()


async def test_without_the_timer_task_waiters_time_themselves_out(autojump_clock):
    """A replica manager used without its run() (unit tests) still answers at the timeout."""
    timer = DelayedTimer()
    start = trio.current_time()
    assert not await OffsetWaiters(timer).wait_for({TP: 1}, lambda: False, 2.0)
    assert not await Watchers(timer).wait_for([TP], lambda: False, 0.5)
    assert trio.current_time() - start == pytest.approx(2.5)


async def test_a_delayed_response_is_a_one_shot_value_whenever_it_completes():
    early = DelayedResponse()
    early.complete([1])
    assert await early.wait() == [1]  # completed before anyone asked
    got: list = []
    early.on_complete(got.append)
    assert got == [[1]]
    late = DelayedResponse()
    late.on_complete(got.append)
    late.complete([2])
    late.complete([9])  # only the first completion counts
    assert got == [[1], [2]] and await late.wait() == [2]
