"""The broker's network layer: trio TCP listeners, one task per connection.

Rules (Kafka's `SocketServer` semantics, with one relaxation):
- requests on a connection are answered in order, and each one's ordered work (a Produce's
  appends) finishes before the next request starts. A handler may `release()` its request once that
  work is done and then wait (a Produce with acks=-1 waiting for the high watermark) while the
  next request starts; up to `MAX_PIPELINED` requests per connection are in progress, the rest wait
  in the socket buffer. Kafka mutes the connection until the response is sent instead; answers and
  append order are the same, but pipelined acks=-1 batches share replication rounds;
- a connection idle for `connections.max.idle.ms` is closed;
- a size prefix above `socket.request.max.bytes` closes the connection with a log line; the body
  is never read into memory;
- a malformed request, an unknown API key, or an unsupported version closes the connection, except
  ApiVersions at an unknown version, which gets a v0 response with UNSUPPORTED_VERSION and the
  served versions (KIP-511) so newer clients downgrade;
- a handler that fails unexpectedly closes that connection only; other clients are unaffected.
- bounds (Kafka's): a connection whose computed responses are not being read (more than
  `MAX_UNSENT_RESPONSE_BYTES` unsent) is not read from, and one whose response stays unread for
  `connections.max.idle.ms` is closed; at most `queued.max.requests` requests do their ordered
  work at once across all connections; connections past `max.connections` /
  `max.connections.per.ip` (and its overrides) are closed at once.

Shutdown (`stop()`): listeners close at once; each connection finishes the request it is handling,
sends the response, and closes; connections still busy after the grace period are cancelled.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from broker.config import Listener
from protocol.api import Request, decode_request, encode_response_parts
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedVersion
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

#: Requests in progress per connection (started, not yet answered); Kafka allows one.
MAX_PIPELINED = 16
#: A connection whose computed responses not yet written to its socket exceed this many bytes is
#: not read from until they are (Kafka mutes a connection while its response is being sent).
MAX_UNSENT_RESPONSE_BYTES = 1 << 20

Handler = Callable[[Any, Request], Awaitable[dict | None]]


class KafkaServer:
    def __init__(
        self,
        listeners: list[Listener],
        handlers: Mapping[int, Handler],
        context: object,
        api_versions: Callable[[], list[dict]],
        *,
        max_request_bytes: int = 104857600,
        idle_timeout_ms: int = 600000,
        max_connections: int = (1 << 31) - 1,
        max_connections_per_ip: int = (1 << 31) - 1,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        queued_max_requests: int = 500,
        queued_max_request_bytes: int = -1,
    ):
        """`max_connections` (broker-wide), `max_connections_per_ip` and its per-host overrides are
        Kafka's `max.connections*` keys: a connection beyond them is closed at once (and logged).
        `queued_max_requests` (Kafka's `queued.max.requests`) bounds the requests doing their
        ordered work at once across all connections (a Produce holds its place only while it
        appends, not while it waits for replication, as in Kafka's purgatory);
        `queued_max_request_bytes` (Kafka's `queued.max.request.bytes`, -1 unbounded) bounds the
        bytes of the requests in progress across all connections: a connection waits to start its
        next request until enough of the others are done (one request is always let through)."""
        self.listeners = listeners
        self.handlers = handlers
        self.context = context
        self.api_versions = api_versions
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_ms / 1000
        self.bound: list[tuple[Listener, int]] = []
        self._accepting = trio.CancelScope()
        self._reading: set[trio.CancelScope] = set()
        self._closing = False
        self._connections: trio.Nursery | None = None
        self.active_connections = 0
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.max_connections_per_ip_overrides = dict(max_connections_per_ip_overrides or {})
        self._per_ip: dict[str, int] = {}
        self._queued = trio.Semaphore(queued_max_requests)
        self._request_bytes = _ByteBudget(queued_max_request_bytes)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Bind every listener and serve until cancelled. `task_status.started()` gets the
        bound (listener, port) pairs (port 0 in a listener binds an ephemeral port)."""
        async with trio.open_nursery() as connections:
            self._connections = connections
            with self._accepting:
                async with trio.open_nursery() as accept:
                    for listener in self.listeners:
                        sockets = await trio.open_tcp_listeners(listener.port, host=listener.host or None)
                        port = sockets[0].socket.getsockname()[1]
                        self.bound.append((listener, port))
                        log.info("listening on %s://%s:%d", listener.name, listener.host or "0.0.0.0", port)
                        serve = functools.partial(self._serve, listener.name)
                        accept.start_soon(
                            functools.partial(trio.serve_listeners, serve, sockets, handler_nursery=connections)
                        )
                    task_status.started(list(self.bound))

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish for up to `grace_s`, then cancel."""
        self._closing = True
        self._accepting.cancel()
        for scope in list(self._reading):
            scope.cancel()
        with trio.move_on_after(grace_s):
            while self.active_connections:
                await trio.sleep(0.01)
        if self._connections is not None:
            self._connections.cancel_scope.cancel()

    def _over_connection_limits(self, ip: str) -> str | None:
        """Why a new connection from `ip` must be closed, or None."""
        if self.active_connections >= self.max_connections:
            return f"max.connections {self.max_connections} reached"
        limit = self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)
        if self._per_ip.get(ip, 0) >= limit:
            return f"max.connections.per.ip {limit} reached for {ip}"
        return None

    async def _serve(self, listener: str, stream: trio.SocketStream) -> None:
        peer = _peer(stream)
        ip = peer.rsplit(":", 1)[0]
        refused = self._over_connection_limits(ip)
        if refused is not None:
            log.warning("closing %s at once: %s", peer, refused)
            await trio.aclose_forcefully(stream)
            return
        self.active_connections += 1
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        backlog = _Backlog()
        try:
            async with stream:
                slots_in, slots_out = trio.open_memory_channel(MAX_PIPELINED - 1)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_responses, stream, slots_out, peer, nursery.cancel_scope, backlog)
                    async with slots_in:
                        await self._read_requests(stream, slots_in, nursery, peer, listener, backlog)
        finally:
            self.active_connections -= 1
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]

    async def _read_requests(
        self,
        stream: trio.SocketStream,
        slots: trio.MemorySendChannel,
        nursery: trio.Nursery,
        peer: str,
        listener: str,
        backlog: _Backlog,
    ) -> None:
        """Read frames and start each request once the previous one has released (its ordered
        work is done) and while the connection's unsent responses stay under
        MAX_UNSENT_RESPONSE_BYTES; stop at EOF, an idle timeout, an oversize frame, a request that
        closes the connection, or shutdown."""
        decoder = FrameDecoder(self.max_request_bytes)
        while not self._closing:
            await backlog.wait_below(MAX_UNSENT_RESPONSE_BYTES)
            reading = trio.CancelScope(deadline=trio.current_time() + self.idle_timeout_s)
            self._reading.add(reading)
            try:
                with reading:
                    # a large frame in progress is read in big pieces (fewer syscalls and appends)
                    data = await stream.receive_some(min(max(65536, decoder.wanted), 4 << 20))
            except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as e:
                log.debug("connection %s ended: %s", peer, e)
                return
            finally:
                self._reading.discard(reading)
            if reading.cancelled_caught:
                if not self._closing:
                    log.info("closing %s: idle for %.0f s", peer, self.idle_timeout_s)
                return
            if not data:
                return
            try:
                frames = decoder.feed(data)
            except FrameTooLarge as e:
                log.warning("closing %s: %s (socket.request.max.bytes)", peer, e)
                return
            for frame in frames:
                await backlog.wait_below(MAX_UNSENT_RESPONSE_BYTES)
                slot = _Slot()
                await slots.send(slot)  # waits while MAX_PIPELINED are in progress
                await self._queued.acquire()  # queued.max.requests across all connections
                try:
                    await self._request_bytes.acquire(len(frame))  # queued.max.request.bytes
                    nursery.start_soon(self._handle, frame, peer, listener, slot, backlog)
                    await slot.released.wait()
                finally:
                    self._queued.release()
                if slot.response is _CLOSE:
                    return

    async def _write_responses(
        self,
        stream: trio.SocketStream,
        slots: trio.MemoryReceiveChannel,
        peer: str,
        connection: trio.CancelScope,
        backlog: _Backlog,
    ) -> None:
        """Send responses in request order; a request that closes the connection ends it after
        the responses before it are sent, and so does a response its client does not read within
        connections.max.idle.ms."""
        try:
            async with slots:
                async for slot in slots:
                    await slot.done.wait()
                    if slot.response is _CLOSE:
                        break
                    if slot.response is not None:
                        with trio.move_on_after(self.idle_timeout_s) as sending:
                            await _send_parts(stream, slot.response)
                        if sending.cancelled_caught:
                            log.info("closing %s: a response was not read for %.0f s", peer, self.idle_timeout_s)
                            break
                        backlog.remove(_size(slot.response))
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as e:
            log.debug("connection %s ended: %s", peer, e)
        connection.cancel()

    async def _handle(self, frame: bytes | bytearray, peer: str, listener: str, slot: _Slot, backlog: _Backlog) -> None:
        size = len(frame)
        try:
            slot.response = await self._respond(frame, peer, listener, slot.release)
            if slot.response is not None and slot.response is not _CLOSE:
                backlog.add(_size(slot.response))
        finally:
            self._request_bytes.release(size)
            slot.release()
            slot.done.set()

    async def _respond(self, frame: bytes | bytearray, peer: str, listener: str, release: Callable[[], None]):
        try:
            request = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key == ApiKey.API_VERSIONS:
                return encode_response_parts(
                    ApiKey.API_VERSIONS,
                    0,
                    e.correlation_id,
                    {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.api_versions()},
                )
            log.warning("closing %s: %s", peer, e)
            return _CLOSE
        except ProtocolError as e:
            log.warning("closing %s: %s: %s", peer, type(e).__name__, e)
            return _CLOSE
        handler = self.handlers.get(request.api_key)
        if handler is None:
            log.warning("closing %s: API %d is not served (ApiVersions does not advertise it)", peer, request.api_key)
            return _CLOSE
        request.release = release
        request.listener = listener
        request.peer = peer
        try:
            body = await handler(self.context, request)
            if body is None:
                return None
            return encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
        except Exception:
            log.exception("closing %s: API %d v%d failed", peer, request.api_key, request.api_version)
            return _CLOSE


_IOV_MAX = 512  # buffers per sendmsg call (Linux allows 1024)


async def _send_parts(stream: trio.SocketStream, parts: list) -> None:
    """Send a response given as buffers: one send_all for one buffer, else vectored sends
    (sendmsg) so referenced record batches are not copied into one frame first."""
    if len(parts) == 1:
        await stream.send_all(parts[0])
        return
    pending = [memoryview(p).cast("B") for p in parts]
    while pending:
        sent = await stream.socket.sendmsg(pending[:_IOV_MAX])
        while sent and pending:
            if sent >= len(pending[0]):
                sent -= len(pending.pop(0))
            else:
                pending[0] = pending[0][sent:]
                sent = 0


class _Slot:
    """One request in progress on a connection: `released` once its ordered work is done,
    `done` once `response` (a list of buffers, None for no response, or _CLOSE) is final."""

    __slots__ = ("released", "done", "response")

    def __init__(self) -> None:
        self.released = trio.Event()
        self.done = trio.Event()
        self.response = None

    def release(self) -> None:
        self.released.set()


_CLOSE = object()


def _size(parts: list) -> int:
    return sum(len(p) for p in parts)


class _ByteBudget:
    """Bytes of requests in progress across all connections, at most `limit` (<= 0: unbounded)
    once anything is held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: set[trio.Event] = set()

    async def acquire(self, n: int) -> None:
        if self.limit <= 0:
            return
        while self.used and self.used + n > self.limit:
            freed = trio.Event()
            self._waiters.add(freed)
            try:
                await freed.wait()
            finally:
                self._waiters.discard(freed)
        self.used += n

    def release(self, n: int) -> None:
        if self.limit <= 0:
            return
        self.used -= n
        for freed in self._waiters:
            freed.set()


class _Backlog:
    """Bytes of a connection's responses computed but not yet written to its socket."""

    __slots__ = ("unsent", "_drained")

    def __init__(self) -> None:
        self.unsent = 0
        self._drained = trio.Event()

    def add(self, n: int) -> None:
        self.unsent += n

    def remove(self, n: int) -> None:
        self.unsent -= n
        self._drained.set()

    async def wait_below(self, limit: int) -> None:
        while self.unsent > limit:
            self._drained = trio.Event()
            await self._drained.wait()


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
