"""`security.tls_write` over a real TLS 1.3 pair on a real socket pair (trio's SSLStream,
trustme's certificates): what it writes at once, what it holds back when the socket is full, and
that nothing overtakes what it holds back, whether its flush or trio's own next send writes it."""

import socket

import trio
from tls_helpers import contexts

from security import tls_write


async def _pair(small_buffers: bool = False):
    server_ctx, client_ctx = contexts()
    a, b = trio.socket.socketpair()
    if small_buffers:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client = trio.SSLStream(trio.SocketStream(a), client_ctx, server_hostname="broker")
    server = trio.SSLStream(trio.SocketStream(b), server_ctx, server_side=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    return client, server


async def _receive(stream: trio.SSLStream, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        data = await stream.receive_some(1 << 20)
        assert data, "the stream ended early"
        out += data
    return bytes(out)


async def test_a_response_goes_at_once_and_arrives_whole():
    client, server = await _pair()
    # the first write after a TLS 1.3 server handshake also sends the session tickets trio held back
    assert server._delayed_outgoing is not None
    assert tls_write.send_now(server, b"hello") is True
    assert server._delayed_outgoing is None
    assert tls_write.send_now(server, b" world") is True
    assert await _receive(client, 11) == b"hello world"


async def test_what_a_full_socket_does_not_take_is_held_back_and_flushed_in_order():
    client, server = await _pair(small_buffers=True)
    big = bytes(range(256)) * 4096  # 1 MiB: far more than both socket buffers hold
    assert tls_write.send_now(server, big) is False
    assert server._delayed_outgoing  # ciphertext held back
    held = len(server._delayed_outgoing)
    # a later write puts its ciphertext behind what is held back (the socket is still full)
    assert tls_write.send_now(server, b"tail") is False
    assert len(server._delayed_outgoing) > held
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tls_write.flush, server)
        assert await _receive(client, len(big) + 4) == big + b"tail"
    assert server._delayed_outgoing is None


async def test_trios_own_send_writes_what_is_held_back_first():
    client, server = await _pair(small_buffers=True)
    big = b"a" * (1 << 20)
    assert tls_write.send_now(server, big) is False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.send_all, b"after")  # trio sends the held-back ciphertext first
        assert await _receive(client, len(big) + 5) == big + b"after"
    await tls_write.flush(server)  # nothing left: a no-op
    assert server._delayed_outgoing is None


async def test_nothing_is_written_before_the_handshake_or_while_a_send_holds_the_lock():
    server_ctx, _ = contexts()
    a, b = trio.socket.socketpair()
    fresh = trio.SSLStream(trio.SocketStream(b), server_ctx, server_side=True)
    assert tls_write.send_now(fresh, b"x") is None
    a.close()
    client, server = await _pair()
    async with server._inner_send_lock:
        assert tls_write.send_now(server, b"x") is None
    assert tls_write.send_now(server, b"") is None  # trio's send_all handles the empty write
    assert tls_write.send_now(server, b"x") is True
    assert await _receive(client, 1) == b"x"
