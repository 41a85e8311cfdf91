"""The broker's network layer: trio TCP listeners, one task per connection.

Rules (Kafka's `SocketServer` semantics):
- requests on a connection are handled one at a time and answered in order (a client may
  pipeline several; they wait in the socket buffer);
- a connection idle for `connections.max.idle.ms` is closed;
- a size prefix above `socket.request.max.bytes` closes the connection with a log line; the body
  is never read into memory;
- a malformed request, an unknown API key, or an unsupported version closes the connection, except
  ApiVersions at an unknown version, which gets a v0 response with UNSUPPORTED_VERSION and the
  served versions (KIP-511) so newer clients downgrade;
- a handler that fails unexpectedly closes that connection only; other clients are unaffected.

Shutdown (`stop()`): listeners close at once; each connection finishes the request it is handling,
sends the response, and closes; connections still busy after the grace period are cancelled.
"""

from __future__ import annotations

import functools
import logging
from typing import Awaitable, Callable

import trio

from broker.config import Listener
from protocol.api import API_VERSIONS_KEY, Request, decode_request, encode_response
from protocol.errors import ErrorCode, FrameTooLarge, ProtocolError, UnsupportedVersion
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

Handler = Callable[[object, Request], Awaitable[dict | None]]


class KafkaServer:
    def __init__(self, listeners: list[Listener], handlers: dict[int, Handler], context: object,
                 api_versions: Callable[[], list[dict]], *, max_request_bytes: int = 104857600,
                 idle_timeout_ms: int = 600000):
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
                        accept.start_soon(functools.partial(trio.serve_listeners, self._serve, sockets,
                                                            handler_nursery=connections))
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

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.active_connections += 1
        peer = _peer(stream)
        decoder = FrameDecoder(self.max_request_bytes)
        try:
            async with stream:
                while not self._closing:
                    reading = trio.CancelScope(deadline=trio.current_time() + self.idle_timeout_s)
                    self._reading.add(reading)
                    with reading:
                        data = await stream.receive_some(65536)
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
                        response = await self._handle(frame, peer)
                        if response is _CLOSE:
                            return
                        if response is not None:
                            await stream.send_all(response)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as e:
            log.debug("connection %s ended: %s", peer, e)
        finally:
            self.active_connections -= 1

    async def _handle(self, frame: bytes, peer: str):
        try:
            request = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key == API_VERSIONS_KEY:
                return encode_response(API_VERSIONS_KEY, 0, e.correlation_id,
                                       {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.api_versions()})
            log.warning("closing %s: %s", peer, e)
            return _CLOSE
        except ProtocolError as e:
            log.warning("closing %s: %s: %s", peer, type(e).__name__, e)
            return _CLOSE
        handler = self.handlers.get(request.api_key)
        if handler is None:
            log.warning("closing %s: API %d is not served (ApiVersions does not advertise it)", peer, request.api_key)
            return _CLOSE
        try:
            body = await handler(self.context, request)
            if body is None:
                return None
            return encode_response(request.api_key, request.api_version, request.correlation_id, body)
        except Exception:
            log.exception("closing %s: API %d v%d failed", peer, request.api_key, request.api_version)
            return _CLOSE


_CLOSE = object()


def _peer(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
