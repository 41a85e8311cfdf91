"""`security.tls_read.drain_tls` over a real TLS 1.3 pair (trio's SSLStream on an in-memory
transport, trustme's certificates): one read returns the plaintext of every whole record the
stream already holds, byte for byte, and what is not yet whole is left for the next read."""

import trio
import trio.testing
from tls_helpers import contexts

from security.tls_read import drain_tls

RECORD = 16384  # TLS's largest record plaintext


def _pair():
    server_ctx, client_ctx = contexts()
    a, b = trio.testing.memory_stream_pair()
    return trio.SSLStream(a, client_ctx, server_hostname="broker"), trio.SSLStream(b, server_ctx, server_side=True)


async def test_one_read_returns_every_whole_record_already_received():
    client, server = _pair()
    payload = bytes(range(256)) * 1024  # 256 KiB: 16 records
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    received = bytearray()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.send_all, payload)
        reads = []
        while len(received) < len(payload):
            data = await server.receive_some(1 << 20)
            data = drain_tls(server, data, 1 << 20)
            reads.append(len(data))
            received += data
    assert bytes(received) == payload
    assert max(reads) > RECORD  # without the drain each read is one record at most
    assert len(reads) < len(payload) // RECORD


async def test_the_drain_stops_at_its_size_and_keeps_the_rest():
    client, server = _pair()
    payload = b"x" * (6 * RECORD)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.send_all, payload)
        first = drain_tls(server, await server.receive_some(RECORD + 10), RECORD + 10)
        assert len(first) <= RECORD + 10
        rest = bytearray()
        while len(first) + len(rest) < len(payload):
            rest += drain_tls(server, await server.receive_some(1 << 20), 1 << 20)
    assert bytes(first + rest) == payload
