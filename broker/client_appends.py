"""Produce appends gathered per partition over one event-loop turn and written as one (issue 48).

With many connections producing to one partition, a loop turn reads several Produce requests
for it. Appended one by one, each pays the whole append path: the partition's checks, a segment
write, the index and tail-cache updates, a high-watermark check, the notify that wakes the
follower fetches, and the metrics. `ClientAppends` holds each request's partitions until the end
of the turn (`broker/turn_end.py`), then appends each partition's requests in one
`Partition.append_group_as_leader`: one write and one notify per partition per turn. Each request
keeps its own outcome (its offsets, or its own error: one refused batch fails only its request),
and the outcomes are those of the same requests appended one by one in arrival order.

The core here is plain state (what waits, per partition and per request); the replica manager
supplies the two actions: appending one partition's group (`append_group`) and finishing a
request whose partitions are all appended (`finish`: an acks=-1 request then waits for the high
watermark as before). An append that does not come through here (a coordinator's, transaction
markers, a KIP-890 verified Produce) first writes what waits for its partitions (`flush`), so a
partition's appends always reach the log in the order they arrived.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from broker.append import AppendResults, PartitionAppend
from broker.turn_end import TurnEnd
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)


class PendingProduce:
    """One Produce request's appends while some of its partitions wait for the turn's end:
    `results` in request order (None until appended), `left` partitions still waiting;
    `appended()` once all are made, then `respond(results)` (at once, or after the acks=-1 wait)."""

    __slots__ = ("results", "left", "acks", "deadline", "respond", "appended")

    def __init__(
        self,
        results: dict,
        acks: int,
        deadline: float,
        respond: Callable[[AppendResults], Any],
        appended: Callable[[], Any],
    ) -> None:
        self.results, self.left, self.acks, self.deadline = results, 0, acks, deadline
        self.respond, self.appended = respond, appended


Item = tuple[Any, int, PendingProduce]  # (records, acks, the request)


class ClientAppends:
    """Requests' partitions waiting for the end of the turn; see the module doc.

    `append_group(tp, [(records, acks), ...])` appends a partition's waiting requests and returns
    their PartitionAppends in order; it must not raise. `finish(request)` is called once per
    request, when all its partitions are appended."""

    def __init__(
        self,
        turn_end: TurnEnd,
        append_group: Callable[[TopicPartition, list[tuple[Any, int]]], list[PartitionAppend]],
        finish: Callable[[PendingProduce], None],
    ) -> None:
        self._turn_end = turn_end
        self._append_group = append_group
        self._finish = finish
        self._waiting: dict[TopicPartition, list[Item]] = {}

    def add(self, request: PendingProduce, tp: TopicPartition, records, acks: int) -> None:
        """Hold `records` for `tp` until the turn's end, as part of `request`."""
        if not self._waiting:
            self._turn_end.soon(self.flush_all)
        self._waiting.setdefault(tp, []).append((records, acks, request))
        request.left += 1

    def flush(self, tps: Iterable[TopicPartition]) -> None:
        """Append now what waits for `tps` (before an append that does not come through here)."""
        if self._waiting:
            self._append({tp: items for tp in tps if (items := self._waiting.pop(tp, None)) is not None})

    def flush_all(self) -> None:
        """The turn's end: append everything that waits, a group per partition."""
        waiting, self._waiting = self._waiting, {}
        self._append(waiting)

    def _append(self, groups: dict[TopicPartition, list[Item]]) -> None:
        done: list[PendingProduce] = []
        for tp, items in groups.items():
            try:
                outcomes = self._append_group(tp, [(records, acks) for records, acks, _ in items])
            except Exception:  # a bug: each request still gets an answer
                log.exception("appending %s failed", tp)
                outcomes = [PartitionAppend(ErrorCode.UNKNOWN_SERVER_ERROR)] * len(items)
            for (_, _, request), outcome in zip(items, outcomes):
                request.results[tp] = outcome
                request.left -= 1
                if request.left == 0:
                    done.append(request)
        for request in done:
            try:
                self._finish(request)
            except Exception:  # its answer failed: the other requests are still answered
                log.exception("finishing a Produce failed")

    def __len__(self) -> int:
        """Partition appends waiting (for tests)."""
        return sum(len(items) for items in self._waiting.values())
