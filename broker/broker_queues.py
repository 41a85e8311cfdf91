"""One queue and one sender task per destination broker, for inter-broker requests that batch
(Kafka's `InterBrokerSendThread` as the transaction marker channel and AddPartitionsToTxnManager
use it): `put(destination, item)` queues an item for a broker; its sender connects on the
inter-broker listener, takes every item queued so far as one batch and hands it to
`send(connection, batch)` (one request for the batch). With `pipelined`, a batch goes out without
waiting for the previous one's answer. When the connection is lost (or cannot be made), every item
still queued is handed to `give_up(item)` (its caller retries, perhaps elsewhere) and the sender
reconnects after `RETRY_BACKOFF_S`. The queues live as long as `run`."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from client.connection import Connection, ConnectionClosed
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)
T = TypeVar("T")
Destination = tuple[int, str, int]  # broker id, host, port
RETRY_BACKOFF_S = 0.1
_LOST = (ConnectionClosed, trio.TooSlowError, ProtocolError, OSError)


class BrokerQueues(Generic[T]):
    def __init__(
        self,
        what: str,
        client_id: str,
        security,
        send: Callable[[Connection, list[T]], Awaitable[None]],
        give_up: Callable[[T], None],
        *,
        pipelined: bool = False,
    ):
        self.what = what  # for the log
        self.client_id = client_id
        self.security = security  # ClientSecurity of the inter-broker listener (None: PLAINTEXT)
        self._send = send
        self._give_up = give_up
        self._pipelined = pipelined
        self._queues: dict[Destination, trio.MemorySendChannel] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def start_soon(self, fn, *args) -> None:
        """Run a task beside the senders (it ends with `run`)."""
        assert self._nursery is not None, "the queues run"
        self._nursery.start_soon(fn, *args)

    def put(self, destination: Destination, item: T) -> None:
        queue = self._queues.get(destination)
        if queue is None:
            assert self._nursery is not None, "the queues run"
            send, receive = trio.open_memory_channel[T](math.inf)
            queue = self._queues[destination] = send
            self._nursery.start_soon(self._sender, destination, receive)
        queue.send_nowait(item)

    async def _sender(self, destination: Destination, queue: trio.MemoryReceiveChannel) -> None:
        broker_id, host, port = destination
        while True:
            try:
                async with Connection.open(host, port, client_id=self.client_id, security=self.security) as conn:
                    async with trio.open_nursery() as in_flight:
                        while True:
                            batch = [await queue.receive()]
                            while True:
                                try:
                                    batch.append(queue.receive_nowait())
                                except trio.WouldBlock:
                                    break
                            if self._pipelined:
                                in_flight.start_soon(self._send, conn, batch)
                            else:
                                await self._send(conn, batch)
            except* _LOST as group:
                log.info("%s to broker %d: %s; reconnecting", self.what, broker_id, group.exceptions[0])
                while True:
                    try:
                        self._give_up(queue.receive_nowait())
                    except trio.WouldBlock:
                        break
                await trio.sleep(RETRY_BACKOFF_S)
