"""A Kafka-aware TCP proxy in front of a cluster, for one client: the nemesis "a transactional
Produce delayed in the network" (issue 44's late write, Jepsen's 2024 hanging-transaction fault).

One listening port per broker on 127.0.0.1. A client bootstrapped on a proxy port stays behind the
proxy: the addresses in Metadata and FindCoordinator responses are rewritten to the proxy's ports
(every other byte passes through as it is; requests are only read, never changed). Armed with
`hold(topic, partition)`, the proxy catches the next transactional Produce naming that partition
and from then on holds everything the client sends to that broker, on every connection, new ones
too (a one-way stall of that link: the client's retries are held as well), until `release()`.
Held bytes are delivered to the broker even if the client gave up and closed the connection
meanwhile (a late write, as a congested network delivers it), connection by connection in the
order the connections were opened. Same approach as `local_cluster/zk_fault_proxy.py`: trio, one task
per direction, frames split with `protocol.framing.FrameDecoder`.
"""

from __future__ import annotations

import logging
import struct
from functools import partial

import trio

from protocol import record_batch as rb
from protocol.api import decode_request, decode_response, encode_response, peek_header
from protocol.api_keys import ApiKey
from protocol.framing import FrameDecoder, encode_frame

log = logging.getLogger(__name__)
_CORRELATION = struct.Struct(">i")
LINGER_S = 2.0  # how long an upstream connection stays open after its client left (late answers)


class KafkaProxy:
    """`targets`: broker id -> (host, port) of its listener. `run` opens the proxy ports
    (`ports`: broker id -> port) and serves until cancelled."""

    def __init__(self, targets: dict[int, tuple[str, int]]):
        self.targets = dict(targets)
        self.ports: dict[int, int] = {}
        self._armed: tuple[str, int] | None = None
        self._armed_was: tuple[str, int] = ("", -1)
        self.held = trio.Event()  # set when a Produce was caught
        self.released = trio.Event()
        self.delivered = trio.Event()  # set when the held bytes reached the broker
        self.held_producer: tuple[int, int] | None = None  # (producer id, epoch) of the held batch
        self.held_broker: int | None = None  # the broker whose link is stalled
        self._delivery_order: list[trio.Event] = []  # held connections' deliveries, in opening order

    def hold(self, topic: str, partition: int) -> None:
        """Hold the next transactional Produce that names (topic, partition)."""
        self._armed = (topic, partition)

    def release(self) -> None:
        self.released.set()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            for broker_id in self.targets:
                listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
                self.ports[broker_id] = listeners[0].socket.getsockname()[1]
                nursery.start_soon(partial(trio.serve_listeners, partial(self._handle, broker_id), listeners))
            task_status.started()

    async def _handle(self, broker_id: int, client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream(*self.targets[broker_id])
        except OSError:
            await client.aclose()
            return
        asked: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version)
        async with upstream, trio.open_nursery() as nursery:
            nursery.start_soon(self._responses, upstream, client, asked)
            await self._requests(broker_id, client, upstream, asked)
            await trio.sleep(LINGER_S)
            nursery.cancel_scope.cancel()

    async def _requests(
        self, broker_id: int, client: trio.SocketStream, upstream: trio.SocketStream, asked: dict
    ) -> None:
        """Client -> broker, frame by frame; while this broker's link is stalled, frames are held
        and go first, in order, after `release` (and after earlier connections' held frames)."""
        decoder = FrameDecoder()
        holding: list[bytes] = []
        lock = trio.Lock()  # upstream writes: the held bytes, then the rest, in order
        started_holding = False

        async def deliver_on_release(previous: trio.Event | None, done: trio.Event) -> None:
            await self.released.wait()
            if previous is not None:
                await previous.wait()
            async with lock:
                try:
                    await upstream.send_all(b"".join(holding))
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
                holding.clear()
            self.delivered.set()
            done.set()
            log.info("delivered the held frames to broker %d, late", broker_id)

        async with trio.open_nursery() as nursery:
            while True:
                try:
                    data = await client.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    data = b""
                if not data:
                    break
                for frame in decoder.feed(data):
                    api_key, api_version, correlation_id = peek_header(frame)
                    asked[correlation_id] = (api_key, api_version)
                    if self._catches(api_key, frame):
                        log.info("holding a transactional Produce to %s-%d", *self._armed_was)
                        self.held_broker = broker_id
                        self.held.set()
                    stalled = self.held_broker == broker_id and not self.released.is_set()
                    if stalled and not started_holding:
                        started_holding = True
                        done = trio.Event()
                        previous = self._delivery_order[-1] if self._delivery_order else None
                        self._delivery_order.append(done)
                        nursery.start_soon(deliver_on_release, previous, done)
                    async with lock:
                        if stalled or holding:
                            holding.append(encode_frame(bytes(frame)))
                        else:
                            await upstream.send_all(encode_frame(bytes(frame)))
            # the client left; what it sent while the link was stalled still arrives, late

    def _catches(self, api_key: int, frame) -> bool:
        """Whether this is the armed transactional Produce (then disarmed)."""
        if self._armed is None or api_key != ApiKey.PRODUCE:
            return False
        body = decode_request(frame).body
        if body.transactional_id is None:
            return False
        topic, partition = self._armed
        for t in body.topic_data:
            for p in t.partition_data:
                if t.name == topic and p.index == partition:
                    header = rb.read_header(p.records)
                    self.held_producer = (header.producer_id, header.producer_epoch)
                    self._armed_was, self._armed = self._armed, None
                    return True
        return False

    async def _responses(self, upstream: trio.SocketStream, client: trio.SocketStream, asked: dict) -> None:
        """Broker -> client; Metadata and FindCoordinator answers name the proxy's ports."""
        decoder = FrameDecoder(max_frame_size=1 << 30)
        client_gone = False
        while True:
            try:
                data = await upstream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
            if not data:
                return
            for frame in decoder.feed(data):
                correlation_id = _CORRELATION.unpack_from(frame)[0]
                api_key, api_version = asked.pop(correlation_id, (-1, -1))
                out = self._rewrite(api_key, api_version, frame)
                if client_gone:
                    continue
                try:
                    await client.send_all(out)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    client_gone = True  # keep reading: the broker's late answers are drained

    def _rewrite(self, api_key: int, api_version: int, frame) -> bytes:
        if api_key not in (ApiKey.METADATA, ApiKey.FIND_COORDINATOR):
            return encode_frame(bytes(frame))
        correlation_id, body = decode_response(api_key, api_version, frame)
        body = dict(body)
        if api_key == ApiKey.METADATA:
            body["brokers"] = [self._node(dict(b)) for b in body["brokers"]]
        elif api_version >= 4:
            body["coordinators"] = [self._node(dict(c)) for c in body["coordinators"]]
        else:
            body = self._node(body)
        return encode_response(api_key, api_version, correlation_id, body)

    def _node(self, entry: dict) -> dict:
        """A broker entry (Metadata's brokers, FindCoordinator's answer) pointed at its proxy port."""
        port = self.ports.get(entry["node_id"])
        if port is not None:
            entry["host"], entry["port"] = "127.0.0.1", port
        return entry
