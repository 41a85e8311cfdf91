"""`broker.delayed.OffsetWaiters`: acks=-1 produces wait for a partition's high watermark; a
notification wakes only the waiters whose offset was reached, in offset order, and finished
waiters do not pile up in the heap."""

import pytest
import trio

from broker.delayed import OffsetWaiters

TP = ("t", 0)


async def test_only_the_waiters_whose_offset_was_reached_wake():
    waiters = OffsetWaiters()
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
    waiters = OffsetWaiters()
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
    waiters = OffsetWaiters()
    for _ in range(200):  # the HW never moves: each waiter times out
        assert not await waiters.wait_for({TP: 100}, lambda: False, 0)
    assert len(waiters) == 0
    assert len(waiters._heaps.get(TP, [])) < OffsetWaiters._COMPACT_AT


@pytest.mark.parametrize("reached", [None, 1000])
async def test_a_notify_after_timeouts_leaves_nothing_behind(reached):
    waiters = OffsetWaiters()
    for _ in range(10):
        await waiters.wait_for({TP: 5}, lambda: False, 0)
    waiters.notify(TP, reached)
    assert not waiters.waiting(TP) and waiters._dead == {}
