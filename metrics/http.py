"""Prometheus' scrape endpoint as a trio task (prometheus_client's own server runs a thread, which
the broker does not): `GET /metrics` answers the registry in the text exposition format
(`generate_latest`); every other GET goes to the web console (`console.server.Console`) when
there is one, else `/` is a one-line pointer and the rest 404; other methods 405. With a TLS
context the same port also speaks HTTPS: a connection whose first byte is a TLS handshake's is
served over TLS (the console's pages need it on a broker whose listeners use TLS). One request per
connection (HTTP/1.0 style, `Connection: close`); a request head over 8 KiB or slower than 10 s,
or an answer not taken in 30 s, closes the connection."""

from __future__ import annotations

import logging
import ssl

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_HEAD = 8192
HEAD_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0


def _response(
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    *,
    head_only: bool = False,
    headers: str = "",
) -> bytes:
    """The whole response; `head_only` (a HEAD request) leaves the body out but keeps its
    Content-Length; `headers`: more header lines, each ending in CRLF."""
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
        f"{headers}Connection: close\r\n\r\n"
    )
    return head.encode() + (b"" if head_only else body)


def answer(request_line: str, registry: CollectorRegistry) -> bytes:
    """The whole HTTP response to one request line ("GET /metrics HTTP/1.1")."""
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response("400 Bad Request", b"bad request line\n")
    method, target = parts[0], parts[1].split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return _response("405 Method Not Allowed", b"only GET\n")
    if target == "/metrics":
        return _response("200 OK", generate_latest(registry), CONTENT_TYPE_LATEST, head_only=method == "HEAD")
    if target == "/":
        return _response("200 OK", b"minikafka broker metrics: /metrics\n")
    return _response("404 Not Found", b"not found: try /metrics\n")


def _authorization(head: bytes) -> str | None:
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.decode("latin-1").partition(":")
        if sep and name.strip().lower() == "authorization":
            return value.strip()
    return None


class _Replay(trio.abc.Stream):
    """A stream whose first bytes were already read (to tell TLS from plain HTTP): they come first."""

    def __init__(self, stream: trio.SocketStream, first: bytes):
        self.stream, self.first = stream, first

    async def receive_some(self, max_bytes=None) -> bytes:
        if self.first:
            data, self.first = self.first, b""
            return data
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()


async def _console_answer(
    console, line: str, head: bytes, host: str, tls: bool = False, certificate: dict | None = None
) -> bytes | None:
    """The console's response to a GET it serves, or None to answer as the metrics endpoint."""
    parts = line.split()
    if console is None or len(parts) != 3 or parts[0] not in ("GET", "HEAD"):
        return None
    if parts[1].split("?", 1)[0] == "/metrics":
        return None
    status, content_type, body = await console.handle(parts[1], _authorization(head), host, tls, certificate)
    challenge = 'WWW-Authenticate: Basic realm="minikafka"\r\n' if status.startswith("401") else ""
    return _response(status, body, content_type, head_only=parts[0] == "HEAD", headers=challenge)


async def _serve_one(stream: trio.SocketStream, registry: CollectorRegistry, console=None, tls=None) -> None:
    """One request. With `tls` (an ssl.SSLContext), a connection that opens with a TLS handshake
    (first byte 0x16) is served over TLS; plain HTTP is served as it is."""
    async with stream:
        try:
            host = stream.socket.getpeername()[0]
        except OSError:
            host = ""
        head = b""
        conversation: trio.abc.Stream = stream
        secure, certificate = False, None
        with trio.move_on_after(HEAD_TIMEOUT_S):
            first = await stream.receive_some(4096)
            if tls is not None and first[:1] == b"\x16":
                ssl_stream = trio.SSLStream(_Replay(stream, first), tls, server_side=True)
                try:
                    await ssl_stream.do_handshake()
                except (trio.BrokenResourceError, ssl.SSLError) as e:
                    log.debug("console TLS handshake failed: %s", e)
                    return
                conversation, secure, certificate = ssl_stream, True, ssl_stream.getpeercert() or None
            else:
                head = first
            while b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) <= MAX_HEAD:
                chunk = await conversation.receive_some(4096)
                if not chunk:
                    break
                head += chunk
        if not head or len(head) > MAX_HEAD:
            return
        line = head.split(b"\n", 1)[0].decode("latin-1").strip()
        response = await _console_answer(console, line, head, host, secure, certificate)
        try:
            with trio.move_on_after(SEND_TIMEOUT_S):  # a reader that does not read is let go
                await conversation.send_all(response if response is not None else answer(line, registry))
                if secure:
                    await conversation.aclose()  # a TLS close_notify, then the socket
        except (trio.BrokenResourceError, ssl.SSLError):
            pass


async def serve_metrics(
    host: str,
    port: int,
    registry: CollectorRegistry,
    console=None,
    tls: ssl.SSLContext | None = None,
    *,
    task_status=trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on host:port (0: any free port) and serve scrapes (and the console's pages, when
    `console` is given; over TLS too, when `tls` is given) until cancelled; reports the bound port
    to `task_status`. Raises OSError if the port cannot be bound."""
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    bound = listeners[0].socket.getsockname()[1]
    log.info("metrics served on http://%s:%d/metrics", host or "0.0.0.0", bound)
    task_status.started(bound)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await _serve_one(stream, registry, console, tls)
        except (trio.BrokenResourceError, OSError) as e:
            log.debug("metrics connection ended: %s", e)

    await trio.serve_listeners(handler, listeners)
