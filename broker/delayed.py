"""Delayed operations (Kafka's purgatory) with trio: wait until a condition holds, woken by keyed
events, or give up at a timeout.

A waiter names the keys that can make its condition true (e.g. `("hw", topic, partition)` for an
acks=-1 produce, `("data", topic, partition)` for a fetch waiting for min_bytes); whoever changes
that state calls `notify(key)`. Waiters re-check on every wake-up, so spurious wake-ups are fine,
and a notification between a check and the wait is never lost (the event is registered before the
check is repeated).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

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
