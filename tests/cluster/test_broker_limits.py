"""Clients cannot exhaust a broker's memory or connections (issue 15 part 3), judged against a real
broker process: a client that sends Fetch requests and never reads the responses holds at most
about one response in the broker, and connections past `max.connections` are closed at once while
existing clients keep being served."""

import psutil
import pytest
import trio
from replication_helpers import create_topic

from client.connection import Connection
from protocol import record_batch as rb
from protocol.api import encode_request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow

MiB = 1 << 20


async def test_a_client_that_never_reads_its_fetch_responses_holds_about_one_in_the_broker(start_broker, zk):
    broker = start_broker(1, message_max_bytes=str(2 * MiB))
    await create_topic({1: broker}, zk, "big", partitions=1, rf=1)
    async with Connection.open(broker.host, broker.port) as conn:
        with trio.fail_after(60):
            for i in range(24):
                batch = rb.build_batch([(None, bytes([i]) * (MiB - 100))])
                while True:
                    r = await conn.request(
                        ApiKey.PRODUCE,
                        {
                            "acks": 1,
                            "timeout_ms": 5000,
                            "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": batch}]}],
                        },
                    )
                    code = r.responses[0].partition_responses[0].error_code
                    if code == ErrorCode.NONE:
                        break
                    assert code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    await trio.sleep(0.1)
    process = psutil.Process(broker.process.pid)
    before = process.memory_info().rss
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 32 * MiB,
        "isolation_level": 0,
        "topics": [
            {"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 32 * MiB}]}
        ],
    }
    stream = await trio.open_tcp_stream(broker.host, broker.port)
    async with stream:
        for correlation_id in range(20):  # 20 x ~24 MiB asked for, nothing read
            await stream.send_all(encode_request(ApiKey.FETCH, 11, correlation_id, fetch))
        await trio.sleep(3)
        grown = process.memory_info().rss - before
    assert grown < 100 * MiB, f"the broker grew by {grown / MiB:.0f} MiB"
    async with Connection.open(broker.host, broker.port) as conn:  # and it still serves others
        md = await conn.request(ApiKey.METADATA, {"topics": [{"name": "big"}]})
    assert md.topics[0].error_code == ErrorCode.NONE


async def test_connections_past_max_connections_are_closed_and_existing_clients_are_served(start_broker, zk):
    broker = start_broker(1, max_connections="20")
    async with Connection.open(broker.host, broker.port) as existing:
        streams = []
        try:
            for _ in range(520):
                streams.append(await trio.open_tcp_stream(broker.host, broker.port))
            closed = 0
            with trio.fail_after(30):
                for stream in streams:  # a refused connection reads EOF; an accepted one waits
                    with trio.move_on_after(0.2):
                        try:
                            if await stream.receive_some(1) == b"":
                                closed += 1
                        except trio.BrokenResourceError:
                            closed += 1
            # 20 in all: the existing client and the controller's own channel take two or three
            assert 500 <= closed <= 503, closed
            md = await existing.request(ApiKey.METADATA, {"topics": []})
            assert md.cluster_id
        finally:
            for stream in streams:
                await stream.aclose()
    assert "max.connections 20 reached" in broker.log_tail(100000)


@pytest.mark.parametrize("limit", [{"queued_max_requests": "2"}, {"queued_max_request_bytes": "300"}])
async def test_queued_limits_bound_work_without_stalling_pipelined_clients(start_broker, zk, limit):
    broker = start_broker(1, **limit)
    await create_topic({1: broker}, zk, "q", partitions=1, rf=1)

    async def client(tag: int, results: list) -> None:
        async with Connection.open(broker.host, broker.port) as conn:
            pending = [
                await conn.send(
                    ApiKey.PRODUCE,
                    {
                        "acks": -1,
                        "timeout_ms": 5000,
                        "topic_data": [
                            {
                                "name": "q",
                                "partition_data": [
                                    {"index": 0, "records": rb.build_batch([(None, b"%d-%d" % (tag, i))])}
                                ],
                            }
                        ],
                    },
                )
                for i in range(10)
            ]
            for p in pending:
                r = await conn.wait(p)
                results.append(r.responses[0].partition_responses[0])

    results: list = []
    with trio.fail_after(30):
        while True:  # the topic's leader is ready once a first produce succeeds
            probe: list = []
            await client(99, probe)
            if all(r.error_code == ErrorCode.NONE for r in probe):
                break
            await trio.sleep(0.1)
        async with trio.open_nursery() as nursery:
            for tag in range(3):
                nursery.start_soon(client, tag, results)
    assert len(results) == 30 and all(r.error_code == ErrorCode.NONE for r in results)
    assert len({r.base_offset for r in results}) == 30  # every batch appended once


async def test_a_broker_out_of_file_descriptors_survives_a_connection_flood(start_broker, zk):
    import resource

    # high watermark checkpoints every second (Kafka's 5 s is waited out otherwise)
    broker = start_broker(1, replica_high_watermark_checkpoint_interval_ms=1000)
    await create_topic({1: broker}, zk, "fd", partitions=1, rf=1)
    async with Connection.open(broker.host, broker.port) as existing:
        resource.prlimit(broker.process.pid, resource.RLIMIT_NOFILE, (150, 150))  # far below the flood
        streams = []
        try:
            for _ in range(500):
                streams.append(await trio.open_tcp_stream(broker.host, broker.port))
            await trio.sleep(2.5)  # past two high watermark checkpoints, which need a descriptor
            assert broker.alive
            md = await existing.request(ApiKey.METADATA, {"topics": [{"name": "fd"}]})
            assert md.topics[0].error_code == ErrorCode.NONE
        finally:
            for stream in streams:
                await stream.aclose()
    with trio.fail_after(20):  # once the flood is gone, new clients are served again
        while True:
            try:
                async with Connection.open(broker.host, broker.port, connect_timeout_s=2) as conn:
                    md = await conn.request(ApiKey.METADATA, {"topics": [{"name": "fd"}]}, timeout_s=5)
                break
            except Exception:
                await trio.sleep(0.5)
    assert md.topics[0].error_code == ErrorCode.NONE and broker.alive
