"""One Produce request per broker for every batch ready at once, as Kafka's `Sender` drains the
record accumulator per node (`RecordAccumulator.drain`), instead of one request per batch.

The producer's per-partition senders keep their own windows, sequence order and retries; they
hand each batch to `ProduceRequests.add(conn, tp, data)` and await the `Slot` it returns. Batches
added within one scheduler turn (and while the connection has `max_in_flight` requests
unanswered) share requests. Rules:
- a request holds at most one batch per partition (Kafka: Produce v3+ carries exactly one record
  batch per partition), and at most `max_request_bytes` of batches unless it holds only one
  (Kafka's `max.request.size`, 1 MiB);
- a partition's next batch goes into a request after the one holding its previous batch, and a
  connection's requests are written in order by one task, so batches of a partition reach the
  broker in the order they were added;
- a broken connection or a timed-out request fails every slot it carries (`ConnectionClosed`,
  `trio.TooSlowError`); the partition senders decide what to resend.
"""

from __future__ import annotations

import weakref

import trio

from client.cluster import KafkaError
from client.connection import Connection, ConnectionClosed
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition


class Slot:
    """One batch's place in a Produce request: `await slot.outcome()` gives its partition's
    response (`partition_responses` item: error_code, base_offset, ...), None under acks=0, or
    raises the request's failure."""

    __slots__ = ("done", "response", "error")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response = None
        self.error: BaseException | None = None

    def _set(self, response=None, error: BaseException | None = None) -> None:
        self.response, self.error = response, error
        self.done.set()

    async def outcome(self):
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.response


class _Request:
    __slots__ = ("batches", "size")

    def __init__(self) -> None:
        self.batches: dict[TopicPartition, tuple[bytes, Slot]] = {}
        self.size = 0

    def settle(self, error: BaseException | None = None) -> None:
        """Every slot fails with `error`, or (None) completes with no response (acks=0)."""
        for _, slot in self.batches.values():
            slot._set(error=error)


class ProduceRequests:
    """Assembles and sends Produce requests (Kafka API key 0) for one producer. `acks`,
    `timeout_ms` (the broker's wait for acks=all) and `transactional_id` are the producer's;
    `wait_s` bounds the wait for each response."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        max_in_flight: int,
        max_request_bytes: int = 1048576,
    ) -> None:
        self._nursery = nursery
        self.acks, self.timeout_ms, self.transactional_id = acks, timeout_ms, transactional_id
        self.max_in_flight, self.max_request_bytes = max_in_flight, max_request_bytes
        self.wait_s = timeout_ms / 1000 + 5
        self._open: dict[Connection, list[_Request]] = {}  # requests not yet written, in order
        # per connection, held weakly: a broken connection's limit goes with it
        self._in_flight: weakref.WeakKeyDictionary[Connection, trio.Semaphore] = weakref.WeakKeyDictionary()
        self.requests_sent = 0

    def add(self, conn: Connection, tp: TopicPartition, data: bytes) -> Slot:
        """Put one record batch (bytes) for `tp` into the next request to `conn` that may take
        it; returns its slot. Never blocks: the requests are written by a task of their own."""
        queue = self._open.get(conn)
        if queue is None:
            queue = self._open[conn] = []
            self._nursery.start_soon(self._write, conn, queue)
        index = 1 + max((i for i, request in enumerate(queue) if tp in request.batches), default=-1)
        while index < len(queue) and queue[index].batches and queue[index].size + len(data) > self.max_request_bytes:
            index += 1
        if index == len(queue):
            queue.append(_Request())
        slot = Slot()
        request = queue[index]
        request.batches[tp] = (data, slot)
        request.size += len(data)
        return slot

    def _body(self, request: _Request) -> dict:
        topics: dict[str, list] = {}
        for (topic, partition), (data, _) in request.batches.items():
            topics.setdefault(topic, []).append({"index": partition, "records": data})
        return {
            "transactional_id": self.transactional_id,
            "acks": self.acks,
            "timeout_ms": self.timeout_ms,
            "topic_data": [{"name": name, "partition_data": parts} for name, parts in topics.items()],
        }

    async def _write(self, conn: Connection, queue: list[_Request]) -> None:
        """Write `conn`'s requests in order, at most `max_in_flight` unanswered; the one task
        doing so for `conn` until its queue is empty (started by the first `add` after that)."""
        limit = self._in_flight.setdefault(conn, trio.Semaphore(self.max_in_flight))
        try:
            while queue:
                await limit.acquire()  # meanwhile, more batches join the queued requests
                request = queue.pop(0)
                try:
                    pending = await conn.send(ApiKey.PRODUCE, self._body(request), expect_response=self.acks != 0)
                except BaseException as e:
                    limit.release()
                    request.settle(e if isinstance(e, ConnectionClosed) else ConnectionClosed(str(e)))
                    raise
                self.requests_sent += 1
                if pending is None:  # acks=0: nothing comes back
                    limit.release()
                    request.settle()
                else:
                    self._nursery.start_soon(self._answer, conn, pending, request, limit)
        except BaseException as e:  # the connection broke (or we are cancelled): fail what is queued
            for request in queue:
                request.settle(ConnectionClosed(f"produce request not sent: {e!r}"))
            queue.clear()
            if not isinstance(e, Exception):
                raise
        finally:
            if self._open.get(conn) is queue:
                del self._open[conn]

    async def _answer(self, conn: Connection, pending, request: _Request, limit: trio.Semaphore) -> None:
        try:
            response = await conn.wait(pending, self.wait_s)
        except Exception as e:  # ConnectionClosed, trio.TooSlowError, a malformed response
            request.settle(e)
            return
        finally:
            limit.release()
        found = {(topic.name, part.index): part for topic in response.responses for part in topic.partition_responses}
        for tp, (_, slot) in request.batches.items():
            part = found.get(tp)
            if part is None:
                slot._set(error=KafkaError(ErrorCode.NETWORK_EXCEPTION, f"no answer for {tp[0]}-{tp[1]}"))
            else:
                slot._set(response=part)
