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
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

import trio


class Watchers:
    def __init__(self) -> None:
        self._waiters: dict[Hashable, set[trio.Event]] = {}

    def notify(self, key: Hashable) -> None:
        """Wake every waiter watching `key`."""
        for event in self._waiters.pop(key, ()):
            event.set()

    async def wait_for(self, keys: Iterable[Hashable], check: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `check()` is true (returns True) or `timeout_s` passes (returns the final
        `check()`)."""
        keys = list(keys)
        with trio.move_on_after(max(0.0, timeout_s)):
            while True:
                event = trio.Event()
                for key in keys:
                    self._waiters.setdefault(key, set()).add(event)
                try:
                    if check():
                        return True
                    await event.wait()
                finally:
                    for key in keys:
                        events = self._waiters.get(key)
                        if events is not None:
                            events.discard(event)
                            if not events:
                                del self._waiters[key]
        return check()

    def __len__(self) -> int:
        """Waiters currently registered (for tests and metrics)."""
        return len({e for events in self._waiters.values() for e in events})


class OffsetWaiters:
    """Waiters for offsets per key (`{tp: offset the HW must reach}`), woken in offset order."""

    #: dead (finished) entries a key's heap may hold before it is rebuilt without them
    _COMPACT_AT = 64

    def __init__(self) -> None:
        self._heaps: dict[Hashable, list[list]] = {}  # key -> heap of [offset, seq, event or None]
        self._dead: dict[Hashable, int] = {}
        self._seq = itertools.count()

    def waiting(self, key: Hashable) -> bool:
        return key in self._heaps

    async def wait_for(self, targets: Mapping[Any, int], check: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until `check()` is true (returns True) or `timeout_s` passes (returns the final
        `check()`); woken by `notify(key, reached)` with `reached >= targets[key]`, or with None."""
        with trio.move_on_after(max(0.0, timeout_s)):
            while True:
                if check():  # nothing can change between this check and the registration
                    return True
                event = trio.Event()
                entries = []
                for key, offset in targets.items():
                    entry = [offset, next(self._seq), event]
                    heapq.heappush(self._heaps.setdefault(key, []), entry)
                    entries.append((key, entry))
                try:
                    await event.wait()
                finally:
                    for key, entry in entries:
                        if entry[2] is not None:  # still in its heap: drop it lazily
                            entry[2] = None
                            self._bury(key)
        return check()

    def notify(self, key: Hashable, reached: int | None) -> None:
        """Wake the waiters of `key` whose offset is <= `reached`; every waiter of `key` when
        `reached` is None (leadership or ISR changed: their outcome is no longer an offset)."""
        heap = self._heaps.get(key)
        if heap is None:
            return
        while heap and (reached is None or heap[0][0] <= reached):
            entry = heapq.heappop(heap)
            event, entry[2] = entry[2], None
            if event is not None:
                event.set()
            else:
                self._dead[key] -= 1
        if not heap:
            del self._heaps[key]
            self._dead.pop(key, None)

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
