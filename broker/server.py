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
- inline handlers (`inline_handlers`: Produce and Fetch) run in the connection's reader task, without a task
  of their own: `handler(ctx, request, respond)` does its ordered work before it returns (or
  sets `request.release_later` and calls `request.release()` once it is done: a Produce's
  appends, made at the end of the loop turn) and calls `respond(body)` once, now or later (a Produce with acks=-1 or a Fetch that waited:
  from the task that changed the partition, or the delayed timer's). A later `respond` writes
  the response as the connection's own tasks do (`ResponseQueue.finished`: one non-blocking
  writev when it is next in order and the writer does not own the socket), with no task switch.
  Spawning and scheduling a task per request, and waking a writer task per delayed response,
  were a large share of a small Produce's and Fetch's cost. They do not hold a `queued.max.requests` place (their ordered work
  never waits).
- bounds (Kafka's): a connection whose computed responses are not being read (more than
  `MAX_UNSENT_RESPONSE_BYTES` unsent) is not read from, and one whose response stays unread for
  `connections.max.idle.ms` is closed; at most `queued.max.requests` requests do their ordered
  work at once across all connections; connections past `max.connections` /
  `max.connections.per.ip` (and its overrides) are closed at once.
- each connection has an id (`Request.connection_id`); once it closes, every
  `disconnect_listeners` callable hears that id (Kafka's `ConnectionDisconnectListener`: the
  share sessions a connection opened end with it).

Security (per listener, `broker/listener_transport.py`): an SSL / SASL_SSL listener wraps each
connection in TLS (trio's `SSLStream`; a failed handshake closes it, within
`HANDSHAKE_TIMEOUT_S`); a SASL_PLAINTEXT / SASL_SSL listener runs the SASL exchange
(`broker/sasl_phase.py`) before serving anything else. Each request carries the connection's
principal (`User:ANONYMOUS`, the certificate's, or the SASL user).

Shutdown (`stop()`): listeners close at once; each connection finishes the request it is handling,
sends the response, and closes; connections still busy after the grace period are cancelled.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import trio

from broker import sasl_phase
from broker.config import Listener
from broker.connection_output import (
    CLOSE,
    MAX_PIPELINED,
    Backlog,
    ResponseQueue,
    Slot,
    response_size,
    send_parts,
)
from broker.error_responses import clipped, error_response
from broker.listener_transport import PLAINTEXT_TRANSPORT, ListenerTransport
from broker.quota.request_time import RequestQuota
from metrics.stats import RequestStats
from protocol.api import Request, decode_request, encode_response_parts
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedVersion
from protocol.framing import FrameDecoder
from security.principal import ANONYMOUS
from security.tls_read import drain_tls

log = logging.getLogger(__name__)

__all__ = ["MAX_PIPELINED", "MAX_UNSENT_RESPONSE_BYTES", "KafkaServer"]

#: A connection whose computed responses not yet written to its socket exceed this many bytes is
#: not read from until they are (Kafka mutes a connection while its response is being sent).
MAX_UNSENT_RESPONSE_BYTES = 1 << 20
#: a TLS handshake (and the SASL exchange) must finish within this many seconds
HANDSHAKE_TIMEOUT_S = 10.0

Handler = Callable[[Any, Request], Awaitable[dict | None]]
#: (context, request, respond): respond(body) exactly once, body None for no response
InlineHandler = Callable[[Any, Request, Callable[[dict | None], None]], None]


class ListenerBindError(Exception):
    """A listener's address cannot be bound (in use, not local, not permitted); the broker
    cannot start (Kafka: "Socket server failed to bind to host:port")."""


@dataclass(frozen=True)
class SocketServerConfig:
    """What the network layer reads of the broker's configuration (Kafka's SocketServer keys;
    sizes in bytes, times in ms). Each field names its key; `broker.config.derive` fills it."""

    max_request_bytes: int = field(metadata={"key": "socket.request.max.bytes"})
    idle_timeout_ms: int = field(metadata={"key": "connections.max.idle.ms"})
    max_connections: int = field(metadata={"key": "max.connections"})
    max_connections_per_ip: int = field(metadata={"key": "max.connections.per.ip"})
    max_connections_per_ip_overrides: Mapping[str, int] = field(metadata={"key": "max.connections.per.ip.overrides"})
    queued_max_requests: int = field(metadata={"key": "queued.max.requests"})
    queued_max_request_bytes: int = field(metadata={"key": "queued.max.request.bytes"})


class KafkaServer:
    def __init__(
        self,
        listeners: list[Listener],
        handlers: Mapping[int, Handler],
        context: object,
        api_versions: Callable[[], list[dict]],
        config: SocketServerConfig,
        *,
        transports: Mapping[str, ListenerTransport] | None = None,
        inline_handlers: Mapping[int, InlineHandler] | None = None,
        request_quota: RequestQuota | None = None,
    ):
        """`config` holds the broker's socket server keys (`SocketServerConfig`, filled by
        `broker.config.derive`: the config table's defaults are the only ones). A connection
        beyond `max.connections` (broker-wide), `max.connections.per.ip` or its per-host
        override is closed at once (and logged). `queued.max.requests` bounds the requests doing
        their ordered work at once across all connections (a Produce holds its place only while
        it appends, not while it waits for replication, as in Kafka's purgatory);
        `queued.max.request.bytes` (-1 unbounded) bounds the bytes of the requests in progress
        across all connections: a connection waits to start its next request until enough of
        the others are done (one request is always let through).
        `transports` gives each listener's TLS and SASL requirements (PLAINTEXT when absent).
        `inline_handlers`: API keys served by a synchronous handler in the reader's task (see the
        module docstring); `handlers` must serve them too (ApiVersions is built from it).
        `request_quota` times each request's handler for `request_percentage` quotas (KIP-124)."""
        self.listeners = listeners
        self.inline_handlers = dict(inline_handlers or {})
        self.request_quota = request_quota
        self.transports = dict(transports or {})
        self.handlers = handlers
        self.context = context
        self.api_versions = api_versions
        self.max_request_bytes = config.max_request_bytes
        self.idle_timeout_s = config.idle_timeout_ms / 1000
        self.bound: list[tuple[Listener, int]] = []
        self._accepting = trio.CancelScope()
        self._reading: set[trio.CancelScope] = set()  # TLS connections waiting for a request
        self._waiting: dict[Any, float] = {}  # plaintext sockets waiting for a request -> since (trio time)
        self._idle_closed: set[Any] = set()  # those woken by `_close_idle`
        self._closing = False
        self._connections: trio.Nursery | None = None
        self.active_connections = 0
        self._drained: trio.Event | None = None  # set when the last connection closes during `stop`
        self.max_connections = config.max_connections
        self.max_connections_per_ip = config.max_connections_per_ip
        self.max_connections_per_ip_overrides = dict(config.max_connections_per_ip_overrides)
        self._per_ip: dict[str, int] = {}
        self._connections_opened = 0  # numbers each connection's id
        self.sessions: dict[str, _Session] = {}  # the open client connections, by id (the console's Clients page)
        #: called with a connection's id once it closed (Kafka's `ConnectionDisconnectListener`:
        #: share sessions end with the connection that opened them); never raise
        self.disconnect_listeners: list[Callable[[str], None]] = []
        self._queued = trio.Semaphore(config.queued_max_requests)
        self._request_bytes = _ByteBudget(config.queued_max_request_bytes)
        self.request_stats = RequestStats()  # kafka.network:type=RequestMetrics, for metrics/

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Bind every listener and serve until cancelled. `task_status.started()` gets the
        bound (listener, port) pairs (port 0 in a listener binds an ephemeral port).
        Raises ListenerBindError when a listener's address cannot be bound."""
        bound = []  # every listener is bound before anything is served
        try:
            for listener in self.listeners:
                try:
                    sockets = await trio.open_tcp_listeners(listener.port, host=listener.host or None)
                except OSError as e:
                    raise ListenerBindError(
                        f"socket server failed to bind to {listener.name}://"
                        f"{listener.host or '0.0.0.0'}:{listener.port}: {e.strerror or e}"
                    ) from None
                bound.append((listener, sockets))
        except BaseException:
            for _, sockets in bound:
                for sock in sockets:
                    await sock.aclose()
            raise
        async with trio.open_nursery() as connections:
            self._connections = connections
            connections.start_soon(self._close_idle)
            with self._accepting:
                async with trio.open_nursery() as accept:
                    for listener, sockets in bound:
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
        for fd in list(self._waiting):
            trio.lowlevel.notify_closing(fd)
        if self.active_connections:
            self._drained = trio.Event()
            with trio.move_on_after(grace_s):
                await self._drained.wait()
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

    async def _serve(self, listener: str, tcp: trio.SocketStream) -> None:
        await self.serve_connection(listener, tcp, _peer(tcp))

    async def serve_connection(self, listener: str, connection: trio.abc.Stream, peer: str) -> None:
        """Serve one accepted connection of `listener` until it ends: `connection` is its stream (a
        socket's, or any trio stream: tests use `trio.testing.memory_stream_pair`, where the
        reads and writes go through trio instead of straight to a socket), `peer` its
        "host:port" (the connection limits count by host)."""
        ip = peer.rsplit(":", 1)[0]
        refused = self._over_connection_limits(ip)
        if refused is not None:
            log.warning("closing %s at once: %s", peer, refused)
            await trio.aclose_forcefully(connection)
            return
        self.active_connections += 1
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        backlog = Backlog()
        transport = self.transports.get(listener, PLAINTEXT_TRANSPORT)
        stream: trio.abc.Stream = connection
        try:
            async with connection:
                decoder = FrameDecoder(self.max_request_bytes)
                frames: list = []
                with trio.move_on_after(HANDSHAKE_TIMEOUT_S) as handshake:
                    opened = await self._open_session(connection, transport, decoder, frames, peer)
                if opened is None or handshake.cancelled_caught:
                    if handshake.cancelled_caught:
                        log.info("closing %s: the TLS / SASL handshake took over %.0f s", peer, HANDSHAKE_TIMEOUT_S)
                    return
                stream, principal = opened
                self._connections_opened += 1
                session = _Session(listener, peer, principal, f"{listener}-{peer}-{self._connections_opened}")
                self.sessions[session.connection_id] = session
                try:
                    async with trio.open_nursery() as nursery:
                        queue = ResponseQueue(stream, backlog, nursery.cancel_scope, peer, self.idle_timeout_s)
                        nursery.start_soon(queue.run)
                        try:
                            await self._read_requests(stream, queue, nursery, session, decoder, frames)
                        finally:
                            queue.input_done()
                finally:
                    del self.sessions[session.connection_id]
                    self._disconnected(session.connection_id)
        except Exception:  # a bug serving one connection closes that connection, never the broker
            log.exception("closing %s: unexpected error serving it", peer)
        finally:
            self.active_connections -= 1
            if not self.active_connections and self._drained is not None:
                self._drained.set()
            self._per_ip[ip] -= 1
            if not self._per_ip[ip]:
                del self._per_ip[ip]

    def _disconnected(self, connection_id: str) -> None:
        for listener in self.disconnect_listeners:
            try:
                listener(connection_id)
            except Exception:  # a listener's bug must not stop the others, nor the connection's cleanup
                log.exception("a disconnect listener failed for %s", connection_id)

    async def _open_session(
        self,
        tcp: trio.abc.Stream,
        transport: ListenerTransport,
        decoder: FrameDecoder,
        leftover: list,
        peer: str,
    ) -> tuple[trio.abc.Stream, str] | None:
        """TLS and SASL as the listener requires: (the stream to serve, the principal), or None
        when the connection must close. Frames read past the SASL exchange go to `leftover`."""
        stream: trio.abc.Stream = tcp
        principal = ANONYMOUS
        if transport.ssl_context is not None:
            tls = trio.SSLStream(tcp, transport.ssl_context, server_side=True)
            try:
                await tls.do_handshake()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                log.info("closing %s: TLS handshake failed: %s", peer, e.__cause__ or e)
                return None
            stream = tls
            mapped = transport.principal_from_certificate(tls.getpeercert())
            if mapped is None:
                return None
            principal = mapped
        if transport.new_authenticator is None:
            return stream, principal
        pending: list = []

        async def next_frame():
            while not pending:
                try:
                    data = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    return None
                if not data:
                    return None
                try:
                    pending.extend(decoder.feed(data))
                except FrameTooLarge as e:
                    log.warning("closing %s: %s (socket.request.max.bytes)", peer, e)
                    return None
            return pending.pop(0)

        async def send(parts: list) -> None:
            await send_parts(stream, parts)

        async def api_versions(frame):
            response = await self._respond(frame, _Session(transport.name, peer, ANONYMOUS, ""), lambda: None)
            return None if response is CLOSE else response

        # until authenticated, a frame may not exceed Kafka's sasl.server.max.receive.size
        decoder.max_frame_size = min(decoder.max_frame_size, sasl_phase.MAX_TOKEN_BYTES)
        try:
            sasl_principal = await sasl_phase.authenticate(
                next_frame, send, transport.new_authenticator(), api_versions, peer
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None
        decoder.max_frame_size = self.max_request_bytes
        if sasl_principal is None:
            return None
        leftover.extend(pending)
        return stream, sasl_principal

    async def _read_requests(
        self,
        stream: trio.abc.Stream,
        queue: ResponseQueue,
        nursery: trio.Nursery,
        session: _Session,
        decoder: FrameDecoder,
        first_frames: list,
    ) -> None:
        """Read frames and start each request once the previous one has released (its ordered
        work is done) and while the connection's unsent responses stay under
        MAX_UNSENT_RESPONSE_BYTES; stop at EOF, an idle timeout, an oversize frame, a request that
        closes the connection, or shutdown. `first_frames` were read already (after SASL)."""
        peer = session.peer
        last: list = [None]  # the latest request started on this connection
        backlog = queue.backlog
        if first_frames and not await self._start_requests(first_frames, queue, nursery, session, last):
            return
        sock = stream if isinstance(stream, trio.SocketStream) else None
        direct = 0  # reads in a row taken straight from the socket, without a scheduler pass
        while not self._closing:
            await backlog.wait_below(MAX_UNSENT_RESPONSE_BYTES)
            # a large frame in progress is read in big pieces (fewer syscalls and appends)
            size = min(max(65536, decoder.wanted), 4 << 20)
            data: bytes | bytearray | None = None
            if sock is not None and direct < _DIRECT_READS:
                data = _receive_now(sock, size)
            elif sock is not None:
                direct = 0
                await trio.lowlevel.checkpoint()  # let the other tasks run now and then
            if data is not None:
                direct += 1
            elif sock is not None:
                direct = 0
                # wait, then read straight from the socket: trio's receive_some would add a
                # scheduler pass after the read
                if not await self._wait_readable(sock, peer):
                    return
                data = _receive_now(sock, size)
                if data is None:  # woken without data: wait again
                    continue
            else:
                reading = trio.CancelScope(deadline=trio.current_time() + self.idle_timeout_s)
                self._reading.add(reading)
                try:
                    with reading:
                        data = await stream.receive_some(size)
                        if data and isinstance(stream, trio.SSLStream):
                            data = drain_tls(stream, data, size)
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
            if not await self._start_requests(frames, queue, nursery, session, last):
                return

    async def _wait_readable(self, sock: trio.SocketStream, peer: str) -> bool:
        """Wait until a plaintext connection's socket is readable; False when the connection must
        end instead: idle for connections.max.idle.ms (`_close_idle`), the server stopping, or
        the socket failing. No cancel scope per wait (its deadline bookkeeping was a noticeable
        share of a small request's cost): the idle sweep and stop() wake the wait with
        `notify_closing` instead."""
        fd = sock.socket
        self._waiting[fd] = trio.current_time()
        try:
            await trio.lowlevel.wait_readable(fd)
            return True
        except trio.ClosedResourceError:
            idle = fd in self._idle_closed
            self._idle_closed.discard(fd)
            if idle and not self._closing:
                log.info("closing %s: idle for %.0f s", peer, self.idle_timeout_s)
            return False
        except (trio.BrokenResourceError, ConnectionError) as e:
            log.debug("connection %s ended: %s", peer, e)
            return False
        finally:
            self._waiting.pop(fd, None)

    async def _close_idle(self) -> None:
        """connections.max.idle.ms for plaintext connections waiting for a request: every tenth
        of the timeout, wake (to close) each whose wait began a timeout ago or earlier."""
        while True:
            await trio.sleep(max(0.01, self.idle_timeout_s / 10))
            limit = trio.current_time() - self.idle_timeout_s
            for fd, since in list(self._waiting.items()):
                if since <= limit:
                    self._idle_closed.add(fd)
                    trio.lowlevel.notify_closing(fd)

    async def _start_requests(
        self,
        frames: list,
        queue: ResponseQueue,
        nursery: trio.Nursery,
        session: _Session,
        last: list,
    ) -> bool:
        """Start each frame's request in order, each once the one before it (`last[0]`, the
        connection's latest) has released; False once one closes the connection. The reader does
        not wait for the release of the request it just started: it goes back to its socket, and
        waits only when the next frame is there (a request a frame costs no extra task switch).
        The primitives are tried without blocking first: each blocking call is a trio checkpoint,
        a pass through the scheduler, and these passes were a large share of a small request's cost."""
        for frame in frames:
            if session.muted_until and session.muted_until > trio.current_time():
                await trio.sleep_until(session.muted_until)  # a quota's throttle (KIP-219's mute)
            previous = last[0]
            if previous is not None:
                if not previous.released.is_set():
                    await previous.released.wait()
                if previous.response is CLOSE:
                    return False
            await queue.backlog.wait_below(MAX_UNSENT_RESPONSE_BYTES)
            slot = Slot()
            await queue.put(slot)  # waits while MAX_PIPELINED are in progress
            if queue.ended:  # the connection is ending (its client went away)
                return False
            inline = self.inline_handlers.get(_api_key(frame))
            if inline is not None:
                self._respond_inline(inline, frame, session, slot, queue)
                last[0] = slot
                continue
            try:
                self._queued.acquire_nowait()  # queued.max.requests across all connections
            except trio.WouldBlock:
                await self._queued.acquire()
            slot.on_release = self._queued.release
            if self._request_bytes.limit > 0:
                try:
                    await self._request_bytes.acquire(len(frame))  # queued.max.request.bytes
                except BaseException:  # cancelled while waiting: the queued.max.requests place goes back
                    slot.release()
                    raise
            nursery.start_soon(self._handle, frame, session, slot, queue)
            last[0] = slot
        return True

    async def _handle(self, frame: bytes | bytearray, session: _Session, slot: Slot, queue: ResponseQueue) -> None:
        size = len(frame)
        response = CLOSE  # unless answered
        try:
            response = await self._respond(frame, session, slot.release)
        finally:
            self._request_bytes.release(size)
            _answer(slot, queue, response)

    async def _respond(self, frame: bytes | bytearray, session: _Session, release: Callable[[], None]):
        request = self._decoded(frame, session)
        if not isinstance(request, Request):
            return request
        handler = self.handlers.get(request.api_key)
        arrived = time.perf_counter()
        if handler is None:
            log.warning(
                "closing %s: API %d is not served (ApiVersions does not advertise it)", session.peer, request.api_key
            )
            return CLOSE
        request.release = release
        quota = self.request_quota if self.request_quota is not None and self.request_quota.active else None
        task = trio.lowlevel.current_task() if quota is not None else None
        if quota is not None and task is not None:
            quota.timer.track(task)
        try:
            body = await handler(self.context, request)
        except Exception:
            return self._failed(request, session, arrived)
        finally:
            if quota is not None and task is not None:
                quota.done(request, quota.timer.untrack(task))
        return self._encoded(request, session, arrived, body)

    def _respond_inline(
        self, handler: InlineHandler, frame: bytes | bytearray, session: _Session, slot: Slot, queue: ResponseQueue
    ) -> None:
        """Serve `frame` with an inline handler now. Its response goes to `queue` when the handler
        responds: before it returns, or later from the task that completes it. Released once
        the handler returns (its ordered work is done), or, when it sets `request.release_later`,
        when it calls `request.release()` (a Produce whose appends wait for the loop turn's end)."""
        arrived = time.perf_counter()
        request = self._decoded(frame, session)
        if not isinstance(request, Request):
            _answer(slot, queue, request)
            return
        quota = self.request_quota
        started = time.perf_counter()
        request.release = slot.release

        def respond(body) -> None:
            try:
                response = self._encoded(request, session, arrived, body)
            except Exception:
                response = self._failed(request, session, arrived)
            _answer(slot, queue, response)

        try:
            handler(self.context, request, respond)
        except Exception:
            if not slot.finished:
                _answer(slot, queue, self._failed(request, session, arrived))
            return
        if quota is not None and quota.active:
            quota.done(request, time.perf_counter() - started)
        if not request.release_later:
            slot.release()

    def _decoded(self, frame: bytes | bytearray, session: _Session):
        """The request with its connection's facts, or what to answer instead: ApiVersions'
        UNSUPPORTED_VERSION response at an unknown version, or CLOSE."""
        peer = session.peer
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
            return CLOSE
        except ProtocolError as e:
            log.warning("closing %s: %s: %s", peer, type(e).__name__, e)
            return CLOSE
        request.listener = session.listener
        request.peer = peer
        request.principal = session.principal
        request.connection_id = session.connection_id
        if request.api_key == ApiKey.API_VERSIONS:
            session.client_id = request.client_id
            if request.api_version >= 3:
                session.software = (request.body.client_software_name, request.body.client_software_version)
        request.client_software = session.software
        request.size = len(frame)
        return request

    def _encoded(self, request: Request, session: _Session, arrived: float, body):
        """A handler's body as response buffers (None: no response; CLOSE when it cannot be
        encoded), counted in the request metrics."""
        if body is None:
            return None
        if request.request_throttle_ms and isinstance(body, dict) and "throttle_time_ms" in body:
            body["throttle_time_ms"] = max(body["throttle_time_ms"], request.request_throttle_ms)
        try:
            parts = encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
        except ValueError:  # a message quoting long names: cut to the protocol's limit, else a bug
            try:
                body = clipped(body)
                parts = encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
            except Exception:
                return self._failed(request, session, arrived)
        except Exception:
            return self._failed(request, session, arrived)
        self.request_stats.record(request.api_key, request.api_version, (time.perf_counter() - arrived) * 1000, body)
        throttle_ms = body.get("throttle_time_ms") if isinstance(body, dict) else None
        if throttle_ms:  # a quota throttled this client: its channel is muted that long (KIP-219)
            session.muted_until = max(session.muted_until, trio.current_time() + throttle_ms / 1000)
        return parts

    def _failed(self, request: Request, session: _Session, arrived: float):
        """A handler raised, or its answer could not be encoded (a bug: logged with its traceback):
        the API's error response, every entity UNKNOWN_SERVER_ERROR (`broker.error_responses`);
        CLOSE only when even that cannot be built or encoded."""
        log.exception("API %d v%d from %s failed", request.api_key, request.api_version, session.peer)
        try:
            body = error_response(
                request.api_key, request.api_version, request.body, ErrorCode.UNKNOWN_SERVER_ERROR, "internal error"
            )
            if body is None:
                return CLOSE
            parts = encode_response_parts(request.api_key, request.api_version, request.correlation_id, body)
        except Exception:
            log.exception(
                "closing %s: no error response for API %d v%d", session.peer, request.api_key, request.api_version
            )
            return CLOSE
        self.request_stats.record(request.api_key, request.api_version, (time.perf_counter() - arrived) * 1000, body)
        return parts


def _answer(slot: Slot, queue: ResponseQueue, response) -> None:
    """Give a request its response (buffers, None or CLOSE), sent in its turn."""
    if response is not None and response is not CLOSE:
        queue.backlog.add(response_size(response))
    slot.response = response  # before the release: the reader checks it for CLOSE then
    slot.release()
    queue.finished(slot, response)


def _api_key(frame) -> int:
    """The API key of a request frame (-1 for a frame too short to hold one)."""
    return (frame[0] << 8 | frame[1]) if len(frame) >= 2 else -1


#: reads taken straight from a socket in a row before the reader lets other tasks run
_DIRECT_READS = 16


def _receive_now(stream: trio.SocketStream, size: int) -> bytes | None:
    """Up to `size` bytes the socket holds now (b"" at its end, or when it failed: the connection
    is over either way), or None when it holds nothing yet; one `os.read` of the non-blocking
    socket, no scheduler pass."""
    try:
        return os.read(stream.socket.fileno(), size)
    except BlockingIOError:
        return None
    except OSError as e:
        log.debug("socket read failed: %s", e)
        return b""


class _Session:
    """What a connection's requests share: its listener, peer, authenticated principal and id
    (unique in this broker's life; "" for a request served without a connection)."""

    __slots__ = ("listener", "peer", "principal", "connection_id", "software", "client_id", "muted_until")

    def __init__(self, listener: str, peer: str, principal: str, connection_id: str):
        self.listener, self.peer, self.principal = listener, peer, principal
        self.connection_id = connection_id
        self.software = ("", "")  # the client's software name and version, from its ApiVersions v3+
        self.client_id = ""  # the client id its ApiVersions carried
        self.muted_until = 0.0  # trio time: a throttled client's next request waits until then


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


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
