"""Work deferred to the end of the event loop's current turn, done by one task in one pass.

trio runs the tasks that are ready in batches: those that one epoll round woke (the connections
whose requests arrived together) run one after another, and a task woken meanwhile runs in the
next batch. `TurnEnd.soon(call)` hands `call` to one task that runs after the current batch, so
the work that batch's tasks deferred is done together: the Produce appends of several connections
written as one per partition (`broker/client_appends.py`), then the follower and consumer fetches
those appends made ready, answered by one read each (`broker/delayed_fetch.py`). A call deferred
during the pass runs in the same pass, after the others. The pass costs one task switch, however
much it does. Until `run` runs (a replica manager used without its task, as unit tests do),
`soon` calls at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

log = logging.getLogger(__name__)


class TurnEnd:
    """Calls deferred to one pass after the current batch of tasks (see the module doc)."""

    def __init__(self) -> None:
        self._calls: list[Callable[[], None]] = []
        self._wake = trio.Event()
        self.running = False

    def soon(self, call: Callable[[], None]) -> None:
        """Run `call()` in the next pass (now, while `run` does not run). It must not block;
        an exception it raises is logged and the pass goes on."""
        if not self.running:
            call()
            return
        self._calls.append(call)
        self._wake.set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run each pass until cancelled; what is deferred when it stops runs at once."""
        self.running = True
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                self._pass()
        finally:
            self.running = False
            self._pass()

    def _pass(self) -> None:
        calls = self._calls
        index = 0
        while index < len(calls):  # calls deferred during the pass join it
            try:
                calls[index]()
            except Exception:  # a bug in one call: the others still run
                log.exception("a call deferred to the end of the loop turn failed")
            index += 1
        calls.clear()
