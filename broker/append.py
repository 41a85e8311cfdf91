"""The one append path's types: where an append comes from, what each partition got, and the
acks=-1 wait (Kafka's `AppendOrigin`, `LogAppendResult` and `DelayedProduce`).

`ReplicaManager.append_records(entries, acks, timeout_ms, origin)` appends every partition's
records now and returns `{tp: PartitionAppend}` when the outcome is known at once (acks 0 or 1,
or no acks=-1 append succeeded), else a `DelayedResponse` completed with that dict once the HW
covers every acks=-1 append, an append can no longer be covered, or `timeout_ms` passed
(REQUEST_TIMED_OUT for what is not covered). `DelayedProduce` holds no task: it is registered in
the replica manager's `OffsetWaiters` (woken by the change that moved a HW or shrank an ISR) and
its `DelayedTimer` (woken at the deadline). Handlers turn the results into their API's wire
shape; the replica manager builds none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

from broker.delayed import DelayedResponse
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from storage.log import LogAppendInfo

if TYPE_CHECKING:
    from broker.delayed import DelayedTimer, OffsetWaiters


@dataclass(slots=True)
class PartitionAppend:
    """One partition's outcome (Kafka's `LogAppendResult`): `error` NONE with the log's `info`
    (offsets, append time, log start offset), or an error code with a message and, for a client
    batch the log refused record by record, KIP-467's (batch index, message) pairs."""

    error: ErrorCode
    info: LogAppendInfo | None = None
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()


AppendResults = dict[TopicPartition, PartitionAppend]


class ReplicationState(Protocol):
    """What a DelayedProduce reads and waits on (the replica manager)."""

    replication_waiters: OffsetWaiters
    delayed_timer: DelayedTimer

    def replication_outcome(self, tp: TopicPartition, required: int) -> ErrorCode | None: ...


def settle(state: ReplicationState, waiting: dict[TopicPartition, int], results: AppendResults) -> None:
    """At the end of an acks=-1 wait: each waiting partition's result takes its replication
    outcome as error (REQUEST_TIMED_OUT for one still not covered)."""
    for tp, required in waiting.items():
        outcome = state.replication_outcome(tp, required)
        code = ErrorCode.REQUEST_TIMED_OUT if outcome is None else outcome
        if code != ErrorCode.NONE:
            results[tp] = PartitionAppend(code)


class DelayedProduce:
    """Kafka's DelayedProduce: acks=-1 appends waiting for the HW, held as registrations in the
    replica manager's OffsetWaiters and DelayedTimer instead of a task. Each wake-up (a notify
    that reached one of its offsets, or the deadline) re-checks every partition and completes
    `delayed` once all are settled or the deadline passed, else watches what is still pending."""

    __slots__ = ("_state", "_waiting", "_results", "_deadline", "_delayed", "_entries", "_timeout", "_finished")

    def __init__(
        self,
        state: ReplicationState,
        waiting: dict[TopicPartition, int],
        results: AppendResults,
        deadline: float,
        delayed: DelayedResponse,
    ) -> None:
        self._state, self._waiting, self._results = state, waiting, results
        self._deadline, self._delayed = deadline, delayed
        self._entries: list = []
        self._timeout: list | None = None
        self._finished = False
        delayed.expire = self._finish

    def try_complete(self) -> None:
        if self._finished:
            return
        outcome = self._state.replication_outcome
        outcomes = {tp: outcome(tp, offset) for tp, offset in self._waiting.items()}
        pending = {tp: self._waiting[tp] for tp, code in outcomes.items() if code is None}
        if not pending:
            self._finish(outcomes)
            return
        if trio.current_time() >= self._deadline:
            self._finish()
            return
        waiters = self._state.replication_waiters
        waiters.unwatch(self._entries)
        self._entries = waiters.watch(pending, self.try_complete)
        if self._timeout is None:
            self._timeout = self._state.delayed_timer.add(self._deadline, self.try_complete)

    def _finish(self, outcomes: dict[TopicPartition, ErrorCode | None] | None = None) -> None:
        """Complete with every partition's outcome: `outcomes` when the caller just read them all
        (none pending), else read now (`settle`)."""
        if self._finished:
            return
        self._finished = True
        self._state.replication_waiters.unwatch(self._entries)
        if self._timeout is not None:
            self._state.delayed_timer.discard(self._timeout)
        # the response's `expire` is this bound method: dropped, so that the operation and its
        # response are freed by reference counting when answered, not left to the cycle collector
        self._delayed.expire = None
        self._entries, self._timeout = [], None
        if outcomes is None:
            settle(self._state, self._waiting, self._results)
        else:
            for tp, code in outcomes.items():
                if code != ErrorCode.NONE:
                    self._results[tp] = PartitionAppend(code)  # type: ignore[arg-type]
        self._delayed.complete(self._results)


async def appended(result: AppendResults | DelayedResponse, timeout_ms: int, timer_running: bool) -> AppendResults:
    """The results of `append_records`, waiting for a DelayedResponse to complete. Without a
    running delayed timer (a replica manager whose `run` is not started, as in unit tests) the
    wait itself expires the operation after `timeout_ms`."""
    if not isinstance(result, DelayedResponse):
        return result
    if timer_running:
        return await result.wait()
    with trio.move_on_after(timeout_ms / 1000):
        return await result.wait()
    if result.expire is not None:  # None once the operation completed (on the same deadline)
        result.expire()
    return await result.wait()
