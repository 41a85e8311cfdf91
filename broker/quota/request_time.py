"""The request quota (KIP-124, `request_percentage`): the share of one thread a client's requests
may use, measured as Kafka measures it, handler time only (a request waiting in a purgatory, for
replication or a long poll, uses none).

trio runs every request in the one event-loop thread, so a request's time is the sum of its task's
steps: `TaskTimer` is a trio instrument that adds up each tracked task's step times (installed
only while some client has a request quota: it costs every task step a little). Inline handlers
(Produce) run within the reader's step and are timed directly.

`RequestQuota.done(request, seconds)` records `seconds * 100` (percent of a thread over one
second, Kafka's `nanosToPercentage`) against the client's quota and sets the request's throttle
time (ms). Exempt, as in Kafka: the APIs a client needs to get started or a broker sends
(ApiVersions, SASL, controller and replication requests).
"""

from __future__ import annotations

import time

import trio

from broker.quota.manager import ClientQuotaManager
from protocol.api_keys import ApiKey

EXEMPT = {
    ApiKey.API_VERSIONS,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.WRITE_TXN_MARKERS,
}


class TaskTimer(trio.abc.Instrument):
    """Per-task step time (s) of the tasks being tracked."""

    def __init__(self) -> None:
        self.spent: dict[trio.lowlevel.Task, float] = {}
        self._started = 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self.spent:
            self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task in self.spent:
            self.spent[task] += time.perf_counter() - self._started

    def track(self, task: trio.lowlevel.Task) -> None:
        """Start timing `task` (the running one) from now: the rest of this step counts too."""
        self.spent[task] = 0.0
        self._started = time.perf_counter()

    def untrack(self, task: trio.lowlevel.Task) -> float:
        """Stop timing `task` (the running one); its time so far, this step included (s)."""
        return self.spent.pop(task, 0.0) + (time.perf_counter() - self._started)


class RequestQuota:
    """The server's hook: time a request's handler, record it, answer the throttle time."""

    def __init__(self, manager: ClientQuotaManager):
        self.manager = manager
        self.timer = TaskTimer()
        self._installed = False

    @property
    def active(self) -> bool:
        """Whether any client has a request quota (else nothing is timed)."""
        wanted = bool(self.manager.quotas)
        if wanted != self._installed:
            try:
                if wanted:
                    trio.lowlevel.add_instrument(self.timer)
                else:
                    trio.lowlevel.remove_instrument(self.timer)
                self._installed = wanted
            except (RuntimeError, KeyError, ValueError):
                return False
        return wanted

    def done(self, request, seconds: float) -> None:
        """Record `seconds` of handler time for `request`'s client and set the request's
        `request_throttle_ms` (0 for the exempt APIs)."""
        if request.api_key not in EXEMPT:
            request.request_throttle_ms = self.manager.record(
                request.user, request.client_id, seconds * 100, trio.current_time() * 1000
            )
