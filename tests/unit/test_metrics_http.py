"""metrics/http.py's responses, without a socket: HEAD answers the GET's head without its body,
and the console's 401 carries the Basic challenge a browser needs to ask for a login."""

import trio
from prometheus_client import CollectorRegistry, Counter

from console.auth import ConsoleAuth
from console.server import Console
from metrics.http import _console_answer, answer


def _split(response: bytes) -> tuple[list[str], bytes]:
    head, _, body = response.partition(b"\r\n\r\n")
    return head.decode().split("\r\n"), body


def test_head_of_metrics_is_the_gets_head_without_the_body():
    registry = CollectorRegistry()
    Counter("requests", "requests answered", registry=registry).inc(3)
    get_head, get_body = _split(answer("GET /metrics HTTP/1.1", registry))
    head_head, head_body = _split(answer("HEAD /metrics HTTP/1.1", registry))
    assert b"requests_total 3.0" in get_body and head_body == b""
    assert head_head == get_head and f"Content-Length: {len(get_body)}" in get_head


def _console(mode: str) -> Console:
    async def no_peers() -> dict[int, str]:
        return {}

    return Console(1, lambda: {"brokers": []}, lambda *a: {}, no_peers, ConsoleAuth(mode, {"admin": "admin-pw"}))


def test_a_console_page_without_a_login_is_refused_with_a_basic_challenge():
    async def main():
        get = await _console_answer(_console("basic"), "GET / HTTP/1.1", b"GET / HTTP/1.1\r\n\r\n", "127.0.0.1")
        head = await _console_answer(_console("basic"), "HEAD / HTTP/1.1", b"HEAD / HTTP/1.1\r\n\r\n", "127.0.0.1")
        return get, head

    get, head = trio.run(main)
    lines, body = _split(get)
    assert lines[0] == "HTTP/1.1 401 Unauthorized" and body
    assert 'WWW-Authenticate: Basic realm="minikafka"' in lines and "Connection: close" in lines
    assert _split(head) == (lines, b"")


def test_metrics_stay_with_the_metrics_endpoint_and_open_consoles_send_no_challenge():
    async def main():
        metrics = await _console_answer(_console("basic"), "GET /metrics HTTP/1.1", b"", "127.0.0.1")
        missing = await _console_answer(_console("open"), "GET /nowhere HTTP/1.1", b"", "127.0.0.1")
        return metrics, missing

    metrics, missing = trio.run(main)
    lines, _ = _split(missing)
    assert metrics is None
    assert lines[0] == "HTTP/1.1 404 Not Found" and not any(line.startswith("WWW-Authenticate") for line in lines)
