"""The trio client core: negotiation, routing to leaders, pipelining, retries with backoff."""

import pytest
import trio
from controller_stub import assign

from client import Cluster, ConnectionClosed, KafkaError
from client.cluster import parse_bootstrap
from protocol import record_batch as rb
from protocol.errors import ErrorCode


def test_bootstrap_parsing():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    for bad in ("a", "a:x", ""):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


async def test_routes_to_leaders_and_pipelines(start_broker):
    b1, b2 = start_broker(1), start_broker(2)
    await assign([b1, b2], {"t": [[1], [2]]})
    async with Cluster.open(b1.bootstrap) as cluster:
        md = await cluster.refresh_metadata()
        assert set(md.brokers) == {1, 2} and md.topics["t"][1].leader == 2
        conn = await cluster.leader_connection("t", 1)
        assert conn.port == b2.port and conn.version_for(0) == 9 and conn.version_for(1) == 12
        offsets = []

        async def produce(i):
            body = {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": "t", "partition_data": [{"index": 1, "records": rb.build_batch([(None, b"%d" % i)])}]}
                ],
            }
            r = await conn.request(0, body)
            offsets.append(r.responses[0].partition_responses[0].base_offset)

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(produce, i)
        assert sorted(offsets) == list(range(50))


async def test_retry_backs_off_on_retriable_errors_only(autojump_clock):
    async with Cluster.open("127.0.0.1:1", retries=3, backoff_ms=100) as cluster:
        calls = []

        async def flaky(refresh):
            calls.append((trio.current_time(), refresh))
            if len(calls) < 3:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return "done"

        start = trio.current_time()
        assert await cluster.retry(flaky) == "done"
        assert [r for _, r in calls] == [False, True, True]
        assert 0.24 < calls[-1][0] - start < 0.36  # ~100 ms then ~200 ms, with jitter

        async def fatal(refresh):
            calls.append(refresh)
            raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS)

        calls.clear()
        with pytest.raises(KafkaError, match="INVALID_REQUIRED_ACKS"):
            await cluster.retry(fatal)
        assert calls == [False]


async def test_unreachable_bootstrap_is_a_clear_error():
    async with Cluster.open("127.0.0.1:1", retries=0) as cluster:
        with pytest.raises(ConnectionClosed, match="no broker reachable"):
            await cluster.refresh_metadata()


async def test_errors_inside_a_connection_block_are_not_wrapped(start_broker):
    from client import Connection

    broker = start_broker(1)
    with pytest.raises(ConnectionClosed):
        async with Connection.open(broker.host, broker.port):
            raise ConnectionClosed("from the block")
    with pytest.raises(KafkaError):
        async with Cluster.open(broker.bootstrap):
            raise KafkaError(ErrorCode.NOT_CONTROLLER)
