"""Prometheus' scrape endpoint as a trio task (prometheus_client's own server runs a thread, which
the broker does not): `GET /metrics` answers the registry in the text exposition format
(`generate_latest`), `GET /` a one-line pointer, anything else 404 or 405. One request per
connection (HTTP/1.0 style, `Connection: close`); a request head over 8 KiB or slower than 10 s
closes the connection."""

from __future__ import annotations

import logging

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_HEAD = 8192
HEAD_TIMEOUT_S = 10.0


def _response(status: str, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def answer(request_line: str, registry: CollectorRegistry) -> bytes:
    """The whole HTTP response to one request line ("GET /metrics HTTP/1.1")."""
    parts = request_line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response("400 Bad Request", b"bad request line\n")
    method, target = parts[0], parts[1].split("?", 1)[0]
    if method not in ("GET", "HEAD"):
        return _response("405 Method Not Allowed", b"only GET\n")
    if target == "/metrics":
        body = generate_latest(registry)
        response = _response("200 OK", body, CONTENT_TYPE_LATEST)
        return response[: len(response) - len(body)] if method == "HEAD" else response
    if target == "/":
        return _response("200 OK", b"minikafka broker metrics: /metrics\n")
    return _response("404 Not Found", b"not found: try /metrics\n")


async def _serve_one(stream: trio.SocketStream, registry: CollectorRegistry) -> None:
    async with stream:
        head = b""
        with trio.move_on_after(HEAD_TIMEOUT_S):
            while b"\r\n\r\n" not in head and b"\n\n" not in head and len(head) <= MAX_HEAD:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                head += chunk
        if not head or len(head) > MAX_HEAD:
            return
        line = head.split(b"\n", 1)[0].decode("latin-1").strip()
        try:
            await stream.send_all(answer(line, registry))
        except trio.BrokenResourceError:
            pass


async def serve_metrics(
    host: str, port: int, registry: CollectorRegistry, *, task_status=trio.TASK_STATUS_IGNORED
) -> None:
    """Listen on host:port (0: any free port) and serve scrapes until cancelled; reports the bound
    port to `task_status`. Raises OSError if the port cannot be bound."""
    listeners = await trio.open_tcp_listeners(port, host=host or None)
    bound = listeners[0].socket.getsockname()[1]
    log.info("metrics served on http://%s:%d/metrics", host or "0.0.0.0", bound)
    task_status.started(bound)

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await _serve_one(stream, registry)
        except (trio.BrokenResourceError, OSError) as e:
            log.debug("metrics connection ended: %s", e)

    await trio.serve_listeners(handler, listeners)
