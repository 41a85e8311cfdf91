"""Delayed operations (Kafka's purgatory) with trio: wait until a condition holds, woken by keyed
events, or give up at a timeout.

A waiter names the keys that can make its condition true (the `(topic, partition)`s a fetch waiting
for data or a DeleteRecords waiting for the low watermark watches); whoever changes
that state calls `notify(key)`. Waiters re-check on every wake-up, so spurious wake-ups are fine,
and a notification between a check and the wait is never lost (the event is registered before the
check is repeated).

`OffsetWaiters` is the same for conditions of the form "this partition's high watermark reached
offset N" (acks=-1 produces): a notification wakes only the waiters whose offset was reached, in
offset order, so a partition with many produces waiting (one per producer connection) costs one
wake-up per answered request instead of one per waiter per change (Kafka's DelayedProduce is
checked per watcher on every change; in Python the wake-ups dominated at 100 connections).

Timeouts are not a `move_on_after` per waiter: entering and leaving a cancel scope registers and
removes a deadline in trio's run loop, and at thousands of acks=-1 produces and follower fetches a
second that was a tenth of a small request's cost. `DelayedTimer` plays the part of Kafka's
purgatory timer instead: one task (`run`) sleeps until the earliest deadline and wakes the waiters
whose deadline passed; a waiter registers its deadline with `add` and drops it with `discard`.
Until that task runs (a replica manager used without its `run`, as unit tests do), each waiter
keeps its own cancel scope, so a timeout is never lost.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import trio


class DelayedTimer:
    """Deadlines of delayed operations (trio clock, seconds), served by one task: `run` wakes the
    event of each entry whose deadline passed. Entries discarded before their deadline are dropped
    lazily (rebuilt away once they outnumber the live ones), so adding and discarding are O(log n)
    and O(1) with no trio call."""

    def __init__(self) -> None:
        self._heap: list[list] = []  # [deadline, seq, wake() or None]
        self._seq = itertools.count()
        self._dead = 0
        self._sleep: trio.CancelScope | None = None  # the run task's sleep, while it sleeps
        self.running = False  # whether `run` serves the deadlines (else waiters time themselves out)

    def add(self, deadline: float, wake: Callable[[], None]) -> list:
        """Call `wake()` at `deadline` (trio.current_time() seconds) unless discarded first;
        returns the entry to pass to `discard`. `wake` runs in the timer's task: it must not
        block or raise."""
        entry = [deadline, next(self._seq), wake]
        heapq.heappush(self._heap, entry)
        if self._sleep is not None and deadline < self._sleep.deadline:
            self._sleep.deadline = deadline
        return entry

    def discard(self, entry: list) -> None:
        if entry[2] is None:
            return
        entry[2] = None
        self._dead += 1
        if self._dead > 1024 and self._dead * 2 > len(self._heap):
            self._heap = [e for e in self._heap if e[2] is not None]
            heapq.heapify(self._heap)
            self._dead = 0

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Wake expired entries until cancelled (entries added before it started are served too)."""
        self.running = True
        task_status.started()
        try:
            await self._serve()
        finally:
            self.running = False

    async def _serve(self) -> None:
        while True:
            heap = self._heap
            now = trio.current_time()
            while heap and (heap[0][0] <= now or heap[0][2] is None):
                entry = heapq.heappop(heap)
                if entry[2] is None:
                    self._dead -= 1
                else:
                    wake, entry[2] = entry[2], None
                    wake()
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as self._sleep:
                await trio.sleep_forever()
            self._sleep = None

    def __len__(self) -> int:
        """Live deadlines (for tests)."""
        return sum(1 for e in self._heap if e[2] is not None)


async def _timed(timer: DelayedTimer, deadline: float, check: Callable[[], bool], wait) -> bool:
    """Run a waiter's `wait()`, whose timeout `timer` serves; while the timer's task is not
    running, under a cancel scope of its own instead (then the final `check()` at the deadline)."""
    if timer.running:
        return await wait()
    with trio.CancelScope(deadline=deadline):
        return await wait()
    return check()


class Watchers:
    """Waiters for keyed changes; their timeouts are served by `timer`. A waiter is a callable
    (`watch`, for operations held as registrations, as `DelayedFetch`) or a task (`wait_for`)."""

    def __init__(self, timer: DelayedTimer) -> None:
        self._timer = timer
        self._waiters: dict[Hashable, set[Callable[[], None]]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every waiter watching `key` (each once: woken, it is no longer registered there)."""
        for wake in self._waiters.pop(key, ()):
            wake()

    def watch(self, keys: Iterable[Hashable], wake: Callable[[], None]) -> None:
        """Call `wake()` at the next notify of any of `keys`. `wake` runs in the notifier's task:
        it must not block or raise. Registering the same callable again is a no-op."""
        for key in keys:
            self._waiters.setdefault(key, set()).add(wake)

    def unwatch(self, keys: Iterable[Hashable], wake: Callable[[], None]) -> None:
        for key in keys:
            wakes = self._waiters.get(key)
            if wakes is not None:
                wakes.discard(wake)
                if not wakes:
                    del self._waiters[key]

    async def wait_for(self, keys: Iterable[Hashable], check: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `check()` is true (returns True) or `timeout_s` passes (returns the final
        `check()`)."""
        keys = list(keys)
        deadline = trio.current_time() + max(0.0, timeout_s)
        return await _timed(self._timer, deadline, check, lambda: self._wait(keys, check, deadline))

    async def _wait(self, keys: list, check: Callable[[], bool], deadline: float) -> bool:
        while trio.current_time() < deadline:
            event = trio.Event()
            self.watch(keys, event.set)
            timeout = self._timer.add(deadline, event.set)
            try:
                if check():
                    return True
                await event.wait()
            finally:
                self._timer.discard(timeout)
                self.unwatch(keys, event.set)
        return check()

    def __len__(self) -> int:
        """Waiters currently registered (for tests and metrics)."""
        return len({wake for wakes in self._waiters.values() for wake in wakes})


class OffsetWaiters:
    """Waiters for offsets per key (`{tp: offset the HW must reach}`), woken in offset order."""

    #: dead (finished) entries a key's heap may hold before it is rebuilt without them
    _COMPACT_AT = 64

    def __init__(self, timer: DelayedTimer) -> None:
        self._timer = timer
        self._heaps: dict[Hashable, list[list]] = {}  # key -> heap of [offset, seq, event or None]
        self._dead: dict[Hashable, int] = {}
        self._seq = itertools.count()

    def waiting(self, key: Hashable) -> bool:
        return key in self._heaps

    async def wait_for(self, targets: Mapping[Any, int], check: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `check()` is true (returns True) or `timeout_s` passes (returns the final
        `check()`); woken by `notify(key, reached)` with `reached >= targets[key]`, or with None."""
        deadline = trio.current_time() + max(0.0, timeout_s)
        return await _timed(self._timer, deadline, check, lambda: self._wait(targets, check, deadline))

    async def _wait(self, targets: Mapping[Any, int], check: Callable[[], bool], deadline: float) -> bool:
        while trio.current_time() < deadline:
            if check():  # nothing can change between this check and the registration
                return True
            event = trio.Event()
            entries = self.watch(targets, event.set)
            timeout = self._timer.add(deadline, event.set)
            try:
                await event.wait()
            finally:
                self._timer.discard(timeout)
                self.unwatch(entries)
        return check()

    def watch(self, targets: Mapping[Any, int], wake: Callable[[], None]) -> list:
        """Call `wake()` (once) when a notify reaches any of `targets` (`{key: offset}`); returns
        the registration for `unwatch`. `wake` runs in the notifier's task: it must not block or
        raise (Kafka's delayed operations complete in the thread that changed the state)."""
        entries = []
        for key, offset in targets.items():
            entry = [offset, next(self._seq), wake]
            heapq.heappush(self._heaps.setdefault(key, []), entry)
            entries.append((key, entry))
        return entries

    def unwatch(self, entries: list) -> None:
        for key, entry in entries:
            if entry[2] is not None:  # still in its heap: drop it lazily
                entry[2] = None
                self._bury(key)

    def notify(self, key: Hashable, reached: int | None) -> None:
        """Wake the waiters of `key` whose offset is <= `reached`; every waiter of `key` when
        `reached` is None (leadership or ISR changed: their outcome is no longer an offset)."""
        heap = self._heaps.get(key)
        if heap is None:
            return
        woken = []
        while heap and (reached is None or heap[0][0] <= reached):
            entry = heapq.heappop(heap)
            wake, entry[2] = entry[2], None
            if wake is not None:
                woken.append(wake)
            else:
                self._dead[key] -= 1
        if not heap:
            del self._heaps[key]
            self._dead.pop(key, None)
        for wake in woken:  # after the heap is consistent: a wake may watch again
            wake()

    def _bury(self, key: Hashable) -> None:
        dead = self._dead.get(key, 0) + 1
        heap = self._heaps[key]
        if dead >= self._COMPACT_AT and dead * 2 >= len(heap):
            live = [entry for entry in heap if entry[2] is not None]
            heapq.heapify(live)
            if live:
                self._heaps[key] = live
                self._dead[key] = 0
            else:
                del self._heaps[key]
                self._dead.pop(key, None)
            return
        self._dead[key] = dead

    def __len__(self) -> int:
        """Live waiters registered (for tests)."""
        return sum(1 for heap in self._heaps.values() for entry in heap if entry[2] is not None)


class DelayedResponse:
    """A one-shot value known only later (the outcome of a delayed operation, e.g. Kafka's
    DelayedProduce): whoever completes the operation calls `complete(value)` once, and one
    receiver gets it, by callback (`on_complete`, run in the completing task) or in a task of its
    own (`wait`). `expire` forces completion now (as at the operation's timeout) when the
    operation has a timeout of its own."""

    __slots__ = ("_callback", "_value", "_done", "expire")

    def __init__(self) -> None:
        self._callback: Callable[[Any], None] | None = None
        self._value: Any = None
        self._done = False
        self.expire: Callable[[], None] | None = None

    def complete(self, value: Any) -> None:
        """Set the value (later calls are ignored) and hand it to the receiver."""
        if self._done:
            return
        self._done, self._value = True, value
        if self._callback is not None:
            callback, self._callback = self._callback, None
            callback(value)

    def on_complete(self, callback: Callable[[Any], None]) -> None:
        """Call `callback(body)` once completed (now, when it already is)."""
        if self._done:
            callback(self._value)
        else:
            self._callback = callback

    async def wait(self) -> Any:
        """The value, once completed."""
        if not self._done:
            event = trio.Event()
            self.on_complete(lambda _: event.set())
            await event.wait()
        return self._value
