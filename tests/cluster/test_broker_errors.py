"""Error paths against a real broker: each returns Kafka's error code (or closes only the offending
connection), and the broker keeps serving other clients."""

import socket
import struct

import trio
from controller_stub import assign

from client.connection import Connection, ConnectionClosed
from protocol import record_batch as rb
from protocol.api import encode_request
from protocol.errors import ErrorCode


def produce_body(topic, partition, records, acks=1):
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def partition_error(response):
    return response.responses[0].partition_responses[0].error_code


async def still_serving(broker):
    """Another client can produce and fetch after the error."""
    async with Connection.open(broker.host, broker.port) as conn:
        r = await conn.request(0, produce_body("t", 0, rb.build_batch([(b"k", b"after")])))
        assert partition_error(r) == ErrorCode.NONE
        f = await conn.request(1, fetch_body("t", 0, r.responses[0].partition_responses[0].base_offset))
        assert rb.decode_records(f.responses[0].partitions[0].records)[0].value == b"after"


def fetch_body(topic, partition, offset, max_wait_ms=0, min_bytes=1, epoch=-1):
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": 1 << 20,
                        "current_leader_epoch": epoch,
                    }
                ],
            }
        ],
    }


async def test_per_partition_errors(start_broker):
    leader = start_broker(1, message_max_bytes="2000")
    other = start_broker(2)
    await assign([leader, other], {"t": [[1], [2, 1]]})
    async with Connection.open(leader.host, leader.port) as conn:
        batch = rb.build_batch([(b"k", b"v")])
        # a partition this broker follows, and one that does not exist
        assert partition_error(await conn.request(0, produce_body("t", 1, batch))) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert (
            partition_error(await conn.request(0, produce_body("nope", 0, batch)))
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        assert (
            partition_error(await conn.request(0, produce_body("t", 7, batch))) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        # oversize (message.max.bytes=2000), corrupt CRC, old message format, invalid acks
        big = rb.build_batch([(None, b"x" * 3000)])
        assert partition_error(await conn.request(0, produce_body("t", 0, big))) == ErrorCode.MESSAGE_TOO_LARGE
        corrupt = bytearray(batch)
        corrupt[-1] ^= 1
        assert partition_error(await conn.request(0, produce_body("t", 0, bytes(corrupt)))) == ErrorCode.CORRUPT_MESSAGE
        wrong_count = bytearray(batch)
        struct.pack_into(">i", wrong_count, 57, 3)
        struct.pack_into(">I", wrong_count, 17, rb.compute_crc(wrong_count, 0, len(wrong_count)))
        assert (
            partition_error(await conn.request(0, produce_body("t", 0, bytes(wrong_count))))
            == ErrorCode.CORRUPT_MESSAGE
        )
        old = bytearray(batch)
        old[16] = 1
        assert (
            partition_error(await conn.request(0, produce_body("t", 0, bytes(old))))
            == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        )
        assert (
            partition_error(await conn.request(0, produce_body("t", 0, batch, acks=2)))
            == ErrorCode.INVALID_REQUIRED_ACKS
        )
        # fetch out of range, from a follower, and with a stale / future leader epoch (KIP-320)
        f = await conn.request(1, fetch_body("t", 0, 10))
        assert f.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        f = await conn.request(1, fetch_body("t", 1, 0), version=10)
        assert f.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # v11+ (KIP-392): a follower answers a consumer up to its HW, as Kafka's brokers do
        f = await conn.request(1, fetch_body("t", 1, 0))
        assert f.responses[0].partitions[0].error_code == ErrorCode.NONE
        await assign([leader, other], {"t": [[1], [2, 1]]}, leader_epoch=3, controller_epoch=2)
        for epoch, code in (
            (1, ErrorCode.FENCED_LEADER_EPOCH),
            (9, ErrorCode.UNKNOWN_LEADER_EPOCH),
            (3, ErrorCode.NONE),
        ):
            f = await conn.request(1, fetch_body("t", 0, 0, epoch=epoch))
            assert f.responses[0].partitions[0].error_code == code, epoch
    await still_serving(leader)


async def test_bad_frames_close_only_their_connection(start_broker):
    broker = start_broker(1, socket_request_max_bytes="10000")
    await assign([broker], {"t": [[1]]})

    def raw(data: bytes) -> bytes:
        with socket.create_connection((broker.host, broker.port), timeout=10) as s:
            s.sendall(data)
            chunks = []
            try:
                while chunk := s.recv(65536):
                    chunks.append(chunk)
            except OSError:
                pass
            return b"".join(chunks)

    # oversize size prefix: closed without the body ever being sent
    assert await trio.to_thread.run_sync(raw, struct.pack(">i", 50_000_000)) == b""
    # garbage, an unknown API key, an unsupported Produce version: closed, no answer
    assert await trio.to_thread.run_sync(raw, struct.pack(">i", 6) + b"\x00\x01\xff\xff\x00\x00") == b""
    assert await trio.to_thread.run_sync(raw, struct.pack(">i", 8) + b"\x03\xe7\x00\x00\x00\x00\x00\x07") == b""
    produce_v2 = struct.pack(">hhih", 0, 2, 5, -1)  # header v1 with a null client id; v2 is not served
    assert await trio.to_thread.run_sync(raw, struct.pack(">i", len(produce_v2)) + produce_v2) == b""
    # ApiVersions at an unknown version: a v0 answer with UNSUPPORTED_VERSION and the served versions
    frame = bytearray(encode_request(18, 3, 77, {}))
    struct.pack_into(">h", frame, 6, 9)
    answer = await trio.to_thread.run_sync(raw, bytes(frame))
    size, correlation_id, error = struct.unpack_from(">iih", answer)
    assert (correlation_id, error) == (77, ErrorCode.UNSUPPORTED_VERSION) and size == len(answer) - 4
    await still_serving(broker)


async def test_connection_idle_timeout(start_broker):
    broker = start_broker(1, connections_max_idle_ms="300")
    async with Connection.open(broker.host, broker.port) as conn:
        for _ in range(8):  # requests 150 ms apart for 1.2 s: never idle for 300 ms
            await conn.request(18, {}, timeout_s=5)
            await trio.sleep(0.15)
        await trio.sleep(1.0)
        try:
            await conn.request(18, {}, timeout_s=5)
            raise AssertionError("an idle connection stayed open")
        except ConnectionClosed:
            pass


async def test_acks_all_waits_and_pipelined_requests_answer_in_order(start_broker):
    broker = start_broker(1)
    await assign([broker], {"t": [[1]]})
    async with Connection.open(broker.host, broker.port) as conn:
        results = []

        async def send(i):
            r = await conn.request(0, produce_body("t", 0, rb.build_batch([(None, b"%d" % i)]), acks=-1))
            results.append((i, r.responses[0].partition_responses[0].base_offset))

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(send, i)
        assert sorted(o for _, o in results) == list(range(20))
        # a long-polling fetch wakes up when data arrives
        async with trio.open_nursery() as nursery:
            got = []

            async def poll():
                f = await conn.request(1, fetch_body("t", 0, 20, max_wait_ms=5000))
                got.append(f.responses[0].partitions[0].records)

            nursery.start_soon(poll)
            await trio.sleep(0.3)
            async with Connection.open(broker.host, broker.port) as other:
                await other.request(0, produce_body("t", 0, rb.build_batch([(None, b"late")])))
        assert rb.decode_records(got[0])[0].value == b"late"


async def test_a_batch_with_a_damaged_record_is_refused_with_kafkas_record_errors(start_broker):
    from record_helpers import DAMAGE, batch, good

    broker = start_broker(1)
    await assign([broker], {"t": [[1]]})
    async with Connection.open(broker.host, broker.port) as conn:
        damaged = batch([good(0), DAMAGE["negative value length"][0](1), good(2)], rb.LZ4)
        r = await conn.request(0, produce_body("t", 0, damaged))
        part = r.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in part.record_errors] == [
            (1, "invalid value length -5")
        ]
        f = await conn.request(1, fetch_body("t", 0, 0))
        assert f.responses[0].partitions[0].high_watermark == 0  # nothing was appended
    await still_serving(broker)


async def test_clients_that_reset_mid_pipeline_cost_only_their_connections(start_broker):
    """A client that pipelines a burst and resets its connection (RST) while the broker is still
    answering: the broker's writer fails first, and the reader, still holding frames of the burst,
    must end only this connection (it once raised out of the connection and stopped the broker)."""
    broker = start_broker(1)
    await assign([broker], {"t": [[1]]})
    burst = encode_request(18, 3, 1, {"client_software_name": "x", "client_software_version": "1"}) * 2000

    def reset_mid_burst() -> None:
        s = socket.create_connection((broker.host, broker.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.sendall(burst)
            s.recv(1024)  # the broker is answering
        except ConnectionResetError:  # only a broker that died resets us first
            return
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST with unread responses and unanswered requests

    for _ in range(40):
        if not broker.alive:
            break
        await trio.to_thread.run_sync(reset_mid_burst)
    assert broker.alive, broker.log_tail()
    assert "unexpected error" not in (broker.directory / "broker.log").read_text()
    await still_serving(broker)
