"""The network layer itself (`broker.server.KafkaServer.serve_connection`) over
`trio.testing.memory_stream_pair` (a socket pair where the direct socket write matters), on
trio's autojump clock: no process. Responses leave in request order even when a later request
finishes first, an inline handler's response completed later from another task reaches the
client through the connection's writer (never written by the completing task), a
malformed frame and an oversize size prefix close the connection, and an idle connection is
closed after `connections.max.idle.ms`."""

import struct

import trio
import trio.testing
from broker_helpers import component_config

from broker.server import KafkaServer, SocketServerConfig
from protocol.api import decode_response, encode_request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder

VERSION = 3  # ApiVersions v3: a flexible request and a v0 response header


def _server(handlers, inline=None, **options) -> KafkaServer:
    """A server with the broker's default socket server keys, `options` (field names) on top."""
    config = component_config(SocketServerConfig, **options)
    return KafkaServer([], handlers, object(), lambda: [], config, inline_handlers=inline or {})


def _api_versions_request(correlation_id: int) -> bytes:
    body = {"client_software_name": "t", "client_software_version": "1"}
    return encode_request(ApiKey.API_VERSIONS, VERSION, correlation_id, body)


def _answer(delay_by_correlation: dict[int, float]):
    """An ApiVersions handler that answers after the delay its request's correlation id names."""

    async def handle(ctx, request):
        request.release()  # no ordered work: the next request may start at once
        await trio.sleep(delay_by_correlation.get(request.correlation_id, 0))
        return {"error_code": ErrorCode.NONE, "api_keys": [], "throttle_time_ms": 0}

    return handle


async def _responses(client, count: int) -> list[int]:
    """The correlation ids of the next `count` responses read from `client`."""
    decoder, ids = FrameDecoder(), []
    while len(ids) < count:
        data = await client.receive_some(65536)
        assert data, "the connection closed"
        for frame in decoder.feed(data):
            ids.append(decode_response(ApiKey.API_VERSIONS, VERSION, frame)[0])
    return ids


async def _closed(client) -> bool:
    try:
        return await client.receive_some(65536) == b""
    except trio.BrokenResourceError:
        return True


async def test_responses_leave_in_request_order_though_a_later_one_finishes_first(autojump_clock):
    server = _server({ApiKey.API_VERSIONS: _answer({1: 5.0, 2: 0.0, 3: 1.0})})
    client, connection = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_connection, "PLAINTEXT", connection, "10.0.0.1:4000")
        started = trio.current_time()
        await client.send_all(b"".join(_api_versions_request(i) for i in (1, 2, 3)))
        assert await _responses(client, 3) == [1, 2, 3]
        assert trio.current_time() - started == 5.0  # the first one held the others back
        await client.aclose()


async def test_a_response_completed_by_another_task_is_written_in_order_by_that_task(autojump_clock, monkeypatch):
    """An inline handler that responds later, from a task of its own (as a delayed produce is
    completed by a follower's fetch): the responses reach the client in request order, and the
    completing task writes them itself (no writer task is woken): the second, completed first,
    waits for the first, and the first's completion writes both. Over a socket pair: the direct
    write (`send_now`) is taken only on a socket."""
    from broker import connection_output

    writers: list[str] = []
    send_now = connection_output.send_now

    def recorded(stream, parts, size):
        writers.append(trio.lowlevel.current_task().name)
        return send_now(stream, parts, size)

    monkeypatch.setattr(connection_output, "send_now", recorded)
    later: list = []

    def inline(ctx, request, respond) -> None:
        later.append((request.correlation_id, respond))

    server = _server({ApiKey.API_VERSIONS: _answer({})}, {ApiKey.API_VERSIONS: inline})
    a, b = trio.socket.socketpair()
    client, connection = trio.SocketStream(a), trio.SocketStream(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_connection, "PLAINTEXT", connection, "10.0.0.1:4000")
        await client.send_all(_api_versions_request(7) + _api_versions_request(8))
        while len(later) < 2:  # both start at once: an inline request releases when it returns
            await trio.sleep(0.1)

        async def complete(respond) -> None:  # another task, as the replica manager's would be
            respond({"error_code": ErrorCode.NONE, "api_keys": [], "throttle_time_ms": 0})

        for _, respond in reversed(later):  # the second completes first
            nursery.start_soon(complete, respond)
            await trio.sleep(1)
        assert await _responses(client, 2) == [7, 8]
        assert len(writers) == 2 and all(w.endswith("complete") for w in writers), writers
        await client.aclose()


async def test_a_malformed_frame_and_an_oversize_prefix_close_the_connection(autojump_clock):
    server = _server({ApiKey.API_VERSIONS: _answer({})}, max_request_bytes=1024)
    for garbage in (struct.pack(">i", 4) + b"\xff\xff\x00\x01", struct.pack(">i", 1 << 20)):
        client, connection = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.serve_connection, "PLAINTEXT", connection, "10.0.0.1:4000")
            await client.send_all(garbage)
            assert await _closed(client)
    assert server.active_connections == 0


async def test_an_idle_connection_is_closed_after_the_idle_timeout(autojump_clock):
    server = _server({ApiKey.API_VERSIONS: _answer({})}, idle_timeout_ms=60_000)
    client, connection = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve_connection, "PLAINTEXT", connection, "10.0.0.1:4000")
        await client.send_all(_api_versions_request(1))
        assert await _responses(client, 1) == [1]
        answered = trio.current_time()
        assert await _closed(client)
        assert trio.current_time() - answered == 60.0
