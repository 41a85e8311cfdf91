"""Transaction markers from the coordinator to partition leaders (Kafka's
`TransactionMarkerChannelManager`, WriteTxnMarkers key 27).

`write` sends one transaction's COMMIT / ABORT marker to every partition of the transaction and
returns once each partition's leader appended it (acks=-1). Partitions are grouped by their
leader in the metadata cache; one sender task per broker drains its queue into a single
WriteTxnMarkers request (the markers of many transactions at once, as Kafka batches them).
Per partition, as Kafka's `TransactionMarkerRequestCompletionHandler`:
- NONE: done;
- the topic no longer exists: done (nothing to mark);
- INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED: a newer producer or coordinator owns
  the partition's producer state: this coordinator stops;
- anything else (not leader, no leader yet, not enough replicas, timeouts, a lost connection, a
  broker that cannot be reached: its queued markers are handed back unanswered): retried with the
  leader looked up again, until `still_current()` turns false.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.broker_queues import BrokerQueues
from client.connection import Connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)
_STOP = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
RETRY_BACKOFF_S = 0.1


class _Item:
    """One transaction's markers for one broker, and its per-partition answer."""

    def __init__(self, marker: dict):
        self.marker = marker
        self.done = trio.Event()
        self.results: dict[TopicPartition, ErrorCode] = {}


class TransactionMarkerChannel:
    def __init__(self, metadata_cache, client_id: str, security=None):
        self.metadata_cache = metadata_cache
        # a broker that cannot be reached hands its queued markers back to their writers unanswered:
        # they look the leaders up again (a leader that died has moved on) instead of waiting for it
        self._queues: BrokerQueues[_Item] = BrokerQueues(
            "marker channel", client_id, security, self._send, lambda item: item.done.set()
        )

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self._queues.run(task_status=task_status)

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        partitions: set[TopicPartition],
        still_current: Callable[[], bool],
    ) -> None:
        remaining = set(partitions)
        last_error: dict[TopicPartition, object] = {}  # what was logged last per partition
        while remaining and still_current():
            by_leader: dict[tuple[int, str, int], list[TopicPartition]] = {}
            for tp in sorted(remaining):
                if tp[0] not in self.metadata_cache.partitions:
                    log.info("marker for %s-%d dropped: the topic no longer exists", *tp)
                    remaining.discard(tp)
                    continue
                broker = self.metadata_cache.leader_broker(*tp)
                if broker is not None:
                    by_leader.setdefault((broker.broker_id, broker.host, broker.port), []).append(tp)
                elif last_error.get(tp) != "no leader":
                    last_error[tp] = "no leader"
                    log.info("marker for %s-%d of producer %d waits for a leader", *tp, producer_id)
            items = []
            for destination, tps in by_leader.items():
                topics: dict[str, list[int]] = {}
                for topic, index in tps:
                    topics.setdefault(topic, []).append(index)
                marker = {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                    "coordinator_epoch": coordinator_epoch,
                }
                item = _Item(marker)
                self._queues.put(destination, item)
                items.append(item)
            for item in items:
                await item.done.wait()
                for tp, code in item.results.items():
                    if code == ErrorCode.NONE:
                        remaining.discard(tp)
                    elif code in _STOP:
                        log.warning(
                            "marker for %s-%d of producer %d refused (%s): stopping", *tp, producer_id, code.name
                        )
                        remaining.discard(tp)
                    elif last_error.get(tp) != code:
                        last_error[tp] = code
                        log.info("marker for %s-%d of producer %d: %s; retrying", *tp, producer_id, code.name)
            if remaining:
                await trio.sleep(RETRY_BACKOFF_S)

    @staticmethod
    async def _send(conn: Connection, batch: list[_Item]) -> None:
        try:
            response = await conn.request(
                ApiKey.WRITE_TXN_MARKERS, {"markers": [i.marker for i in batch]}, timeout_s=60
            )
        except BaseException:
            for item in batch:
                item.done.set()  # no results: every partition is retried
            raise
        for item, answer in zip(batch, response.markers):
            for topic in answer.topics:
                for p in topic.partitions:
                    item.results[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        for item in batch:
            item.done.set()
