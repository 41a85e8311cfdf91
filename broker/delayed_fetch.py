"""Kafka's DelayedFetch: a Fetch (key 1) that had less than `min_bytes` to answer, held until its
partitions change or `max_wait_ms` passes.

It holds no task (issue 48): it is a registration in the replica manager's `Watchers` (woken by
the notify that follows an append, a high watermark move, a leadership or log change of one of
its partitions) and in its `DelayedTimer` (woken at the deadline). Each wake-up re-checks
`can_complete()`, which decides from offsets without reading (Kafka's `DelayedFetch.tryComplete`);
once it holds, or at the deadline, `read()` builds the answer and `complete(answer)` gets it,
exactly once.

A fetch found ready by a notify is not answered inside the notifier: it is handed to `defer`,
which answers every ready fetch in one pass after the event loop's current batch of tasks
(`ReadyFetches`, in `broker/turn_end.py`'s pass). The appends of several connections read in one loop turn then travel in one
fetch response to each follower (one fetch round per loop turn, not per append), and an append
never pays for the reads it woke.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

from broker.read_results import FetchResult
from broker.turn_end import TurnEnd
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.delayed import DelayedTimer, Watchers

log = logging.getLogger(__name__)


def _answered() -> None:
    """What an answered DelayedFetch keeps in place of its `try_complete`."""


class DelayedFetch:
    """A fetch waiting for data: `keys` are its partitions, `deadline` a trio.current_time()
    in seconds. `start()` registers it; `finish()` completes it now (the deadline's path, also
    for callers that bound the wait themselves)."""

    __slots__ = ("_watchers", "_timer", "_keys", "_can_complete", "_read", "_complete", "_deadline", "_timeout",
                 "_wake", "_finished", "_defer", "_deferred")  # fmt: skip

    def __init__(
        self,
        watchers: Watchers,
        timer: DelayedTimer,
        keys: Sequence[Hashable],
        can_complete: Callable[[], bool],
        read: Callable[[], FetchResult],
        complete: Callable[[FetchResult], Any],
        deadline: float,
        defer: Callable[[DelayedFetch], None] | None = None,
    ) -> None:
        self._watchers, self._timer, self._keys = watchers, timer, keys
        self._defer, self._deferred = defer, False
        self._can_complete, self._read, self._complete = can_complete, read, complete
        self._deadline = deadline
        self._timeout: list | None = None
        self._wake = self.try_complete  # one bound method: the callable registered and removed
        self._finished = False

    def start(self) -> None:
        self._timeout = self._timer.add(self._deadline, self.finish)
        self._watchers.watch(self._keys, self._wake)

    @property
    def finished(self) -> bool:
        return self._finished

    def try_complete(self) -> None:
        """A notify of one of its partitions: answer if there is enough now, else watch again
        (the notified partition's registration was used up; the others' re-adding is a no-op)."""
        if self._finished or self._deferred:
            return
        try:
            ready = self._can_complete()
        except Exception:  # never the notifier's failure: answered now, from a fresh read
            log.exception("a delayed fetch's completion check failed")
            ready = True
        if ready and self._defer is not None:
            self._deferred = True
            self._defer(self)
        elif ready:
            self.finish()
        else:
            self._watchers.watch(self._keys, self._wake)

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        self._watchers.unwatch(self._keys, self._wake)
        self._wake = _answered  # not its own bound method: a cycle the collector alone would free
        if self._timeout is not None:
            self._timer.discard(self._timeout)
            self._timeout = None
        try:
            answer = self._read()
        except Exception:  # a bug: the fetch is still answered, and the notifier goes on
            log.exception("a delayed fetch's read failed")
            answer = FetchResult(ErrorCode.UNKNOWN_SERVER_ERROR, 0)
        self._complete(answer)


class ReadyFetches:
    """Delayed fetches found ready, answered in one pass at the end of the event loop's turn
    (`broker/turn_end.py`, shared with the replica manager's other deferred work): a notify
    costs an append one list append, and the pass one task switch for all of them. Until the
    pass's task runs (a replica manager used without its task, as unit tests do), a ready fetch
    is answered at once."""

    def __init__(self, turn_end: TurnEnd | None = None) -> None:
        self._ready: list[DelayedFetch] = []
        self._turn_end = TurnEnd() if turn_end is None else turn_end
        self.run = self._turn_end.run  # the pass's task (started once, by whoever owns `turn_end`)

    def defer(self, fetch: DelayedFetch) -> None:
        if not self._turn_end.running:
            fetch.finish()
            return
        if not self._ready:
            self._turn_end.soon(self._answer)
        self._ready.append(fetch)

    def _answer(self) -> None:
        ready, self._ready = self._ready, []
        for fetch in ready:
            try:
                fetch.finish()
            except Exception:  # its answer's callback failed: the other fetches are still answered
                log.exception("answering a ready fetch failed")
