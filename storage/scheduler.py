"""Periodic background work (Kafka's `KafkaScheduler` tasks) as trio tasks: flushes, checkpoints,
retention, ISR shrinking. A failing run (EMFILE, ENOSPC, a bug) is logged and the task runs again
at its next interval: a periodic task never takes the broker down."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

log = logging.getLogger(__name__)


async def run_periodically(name: str, interval_s: float, job: Callable[[], Awaitable[object]]) -> None:
    """Run `await job()` every `interval_s` seconds (after each sleep) until cancelled; an
    exception from one run is logged with `name` and the next run happens as usual."""
    while True:
        await trio.sleep(interval_s)
        try:
            await job()
        except Exception:
            log.exception("periodic task %s failed; it runs again in %.1f s", name, interval_s)
