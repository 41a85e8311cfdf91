"""`broker.delayed_fetch`: a fetch waiting for data is a registration, not a task (Kafka's
DelayedFetch). A notify that finds it ready hands it to `ReadyFetches`, which answers every ready
fetch in one pass after the notifying task's step, so the appends of one loop turn are read by
one answer; the deadline answers it from the timer; a failing read still answers it, and never
fails the notifier."""

import trio
import trio.testing

from broker.delayed import DelayedTimer, Watchers
from broker.delayed_fetch import DelayedFetch, ReadyFetches
from broker.read_results import FetchResult
from protocol.errors import ErrorCode

A, B = ("t", 0), ("t", 1)


class Log:
    """A stand-in for the partitions a fetch watches: an end offset per key."""

    def __init__(self) -> None:
        self.end = {A: 0, B: 0}
        self.reads: list[dict] = []

    def read(self) -> FetchResult:
        self.reads.append(dict(self.end))
        return FetchResult(ErrorCode.NONE, 0, [("t", [])])


def _delayed(watchers, timer, log, answers, ready=None, deadline=10.0, can_complete=None):
    fetch = DelayedFetch(
        watchers,
        timer,
        [A, B],
        can_complete or (lambda: any(v > 0 for v in log.end.values())),
        log.read,
        answers.append,
        trio.current_time() + deadline,
        None if ready is None else ready.defer,
    )
    fetch.start()
    return fetch


async def test_appends_notified_in_one_step_are_answered_by_one_read_after_it():
    timer = DelayedTimer()
    watchers, ready, log, answers = Watchers(timer), ReadyFetches(), Log(), []
    async with trio.open_nursery() as nursery:
        await nursery.start(timer.run)
        await nursery.start(ready.run)
        fetch = _delayed(watchers, timer, log, answers, ready)
        watchers.notify(A)  # nothing appended yet: watched again
        assert not answers and len(watchers) == 1
        log.end[A] = 1
        watchers.notify(A)
        log.end[B] = 1
        watchers.notify(B)  # the same step: no second answer, no read yet
        assert not answers and not log.reads
        await trio.testing.wait_all_tasks_blocked()
        assert log.reads == [{A: 1, B: 1}] and len(answers) == 1  # one read saw both appends
        assert fetch.finished and len(watchers) == 0 and len(timer) == 0
        nursery.cancel_scope.cancel()


async def test_the_deadline_answers_from_a_read_at_the_deadline(autojump_clock):
    timer = DelayedTimer()
    watchers, log, answers = Watchers(timer), Log(), []
    async with trio.open_nursery() as nursery:
        await nursery.start(timer.run)
        started = trio.current_time()
        _delayed(watchers, timer, log, answers, ReadyFetches(), deadline=0.5)
        while not answers:
            await trio.sleep(0.01)
        assert trio.current_time() - started >= 0.5 and len(log.reads) == 1
        assert len(watchers) == 0
        nursery.cancel_scope.cancel()


async def test_without_the_ready_task_a_ready_fetch_is_answered_at_once():
    timer = DelayedTimer()
    watchers, log, answers = Watchers(timer), Log(), []
    _delayed(watchers, timer, log, answers, ReadyFetches())
    log.end[B] = 3
    watchers.notify(B)
    assert len(answers) == 1 and log.reads == [{A: 0, B: 3}]


async def test_a_failing_check_or_read_answers_an_error_and_the_notifier_goes_on():
    timer = DelayedTimer()
    watchers, log, answers = Watchers(timer), Log(), []

    def broken_read() -> FetchResult:
        raise OSError("disk gone")

    log.read = broken_read
    _delayed(watchers, timer, log, answers, can_complete=lambda: 1 / 0)
    watchers.notify(A)  # does not raise
    assert [a.error_code for a in answers] == [ErrorCode.UNKNOWN_SERVER_ERROR]
    assert len(watchers) == 0 and len(timer) == 0
