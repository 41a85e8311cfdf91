"""Requests Kafka accepts are accepted here, judged with real clients and raw frames against a
real broker: librdkafka's Metadata for all topics (three bytes after its body, librdkafka#5049),
bytes after any request body, and every topic config key Kafka 3.8 accepts at creation."""

import struct

import pytest
import trio
from replication_helpers import create_topic

from protocol import record_batch as rb
from protocol.api import decode_response, encode_request
from protocol.errors import ErrorCode

TIMEOUT = 30


@pytest.fixture
async def broker(start_broker):
    return start_broker(1)


async def create_and_wait(broker, zk, name, configs=None):
    """Create a one-partition topic and wait until the broker's Metadata shows its leader."""
    from client.connection import Connection

    await create_topic({1: broker}, zk, name, partitions=1, rf=1, configs=configs)
    with trio.fail_after(TIMEOUT):
        while True:
            async with Connection.open(broker.host, broker.port) as conn:
                md = await conn.request(3, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
            if md.topics[0].error_code == 0 and md.topics[0].partitions[0].leader_id == 1:
                return
            await trio.sleep(0.05)


def _list_topics_three_ways(bootstrap: str) -> dict:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lister"})
    try:
        return {
            name: set(client.list_topics(timeout=TIMEOUT).topics)
            for name, client in (("admin", admin), ("producer", producer), ("consumer", consumer))
        }
    finally:
        consumer.close()


async def test_confluent_list_topics_for_all_topics(broker, zk):
    await create_and_wait(broker, zk, "listed")
    seen = await trio.to_thread.run_sync(_list_topics_three_ways, broker.bootstrap)
    assert seen == {"admin": {"listed"}, "producer": {"listed"}, "consumer": {"listed"}}
    assert "bytes after" not in broker.log_tail(20000)


async def _raw_request(stream, api_key, version, correlation_id, body, extra=b""):
    frame = encode_request(api_key, version, correlation_id, body, client_id="raw")
    frame = struct.pack(">i", len(frame) - 4 + len(extra)) + frame[4:] + extra
    await stream.send_all(frame)
    size = struct.unpack(">i", await _receive_exactly(stream, 4))[0]
    got_id, response = decode_response(api_key, version, await _receive_exactly(stream, size))
    assert got_id == correlation_id
    return response


async def _receive_exactly(stream, n):
    data = b""
    while len(data) < n:
        chunk = await stream.receive_some(n - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


@pytest.mark.parametrize("extra", [b"\x01\x00\x00", b"\x00" * 64])
async def test_bytes_after_a_request_body_are_ignored(broker, zk, extra):
    await create_and_wait(broker, zk, "raw")
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream(broker.host, broker.port)
        async with stream:
            md = await _raw_request(stream, 3, 12, 1, {"topics": None}, extra)
            assert [t.name for t in md.topics] == ["raw"] and md.brokers[0].node_id == 1
            produced = await _raw_request(
                stream,
                0,
                9,
                2,
                {
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topic_data": [
                        {"name": "raw", "partition_data": [{"index": 0, "records": rb.build_batch([(b"k", b"v")])}]}
                    ],
                },
                extra,
            )
            part = produced.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
            fetched = await _raw_request(
                stream,
                1,
                12,
                3,
                {
                    "replica_id": -1,
                    "max_wait_ms": 0,
                    "min_bytes": 1,
                    "max_bytes": 1 << 20,
                    "topics": [
                        {
                            "topic": "raw",
                            "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                        }
                    ],
                },
                extra,
            )
            records = fetched.responses[0].partitions[0].records
            assert [(r.key, r.value) for r in rb.decode_records(records)] == [(b"k", b"v")]
            # and the connection is still in service
            assert (await _raw_request(stream, 18, 3, 4, {})).error_code == ErrorCode.NONE


async def _create(broker, name, configs):
    from client.connection import Connection

    async with Connection.open(broker.host, broker.port) as conn:
        r = await conn.request(
            19,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in configs.items()],
                    }
                ],
                "timeout_ms": 10000,
            },
        )
    return r.topics[0]


async def test_topic_configs_kafka_accepts_at_creation(broker, zk):
    await create_and_wait(broker, zk, "warmup")
    accepted = {
        "compression.type": "gzip",
        "min.cleanable.dirty.ratio": "0.3",
        "delete.retention.ms": "1000",
        "message.timestamp.difference.max.ms": "3600000",
        "message.downconversion.enable": "false",
        "segment.jitter.ms": "10",
    }
    result = await _create(broker, "configured", accepted)
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    refused = await _create(broker, "preallocated", {"preallocate": "true"})
    assert refused.error_code == ErrorCode.INVALID_CONFIG and "preallocate" in refused.error_message
    unknown = await _create(broker, "unknown", {"no.such.config": "1"})
    assert unknown.error_code == ErrorCode.INVALID_CONFIG and "no.such.config" in unknown.error_message


def _produce_uncompressed(bootstrap, topic):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "none", "linger.ms": 20})
    for i in range(20):
        producer.produce(topic, b"value %d " % i * 10, key=b"%d" % i)
    assert producer.flush(TIMEOUT) == 0


async def test_compression_type_topic_stores_what_confluent_sends_in_its_codec(broker, zk):
    from client.connection import Connection

    await create_and_wait(broker, zk, "zipped", {"compression.type": "zstd"})
    await trio.to_thread.run_sync(_produce_uncompressed, broker.bootstrap, "zipped")
    async with Connection.open(broker.host, broker.port) as conn:
        f = await conn.request(
            1,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "topics": [
                    {
                        "topic": "zipped",
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
            },
        )
    data = bytes(f.responses[0].partitions[0].records)
    batches = list(rb.iter_batches(data))
    assert batches and all(rb.CODEC_NAMES[h.compression] == "zstd" for _, h in batches)
    values = [r.value for pos, h in batches for r in rb.decode_records(data, pos, h)]
    assert values == [b"value %d " % i * 10 for i in range(20)]


async def test_delete_topic_enable_false_refuses_deletion(start_broker, zk):
    from client.connection import Connection

    broker = start_broker(1, delete_topic_enable="false")
    await create_and_wait(broker, zk, "kept")
    async with Connection.open(broker.host, broker.port) as conn:
        r = await conn.request(20, {"topic_names": ["kept"], "timeout_ms": 5000}, version=5)
        md = await conn.request(3, {"topics": [{"name": "kept"}], "allow_auto_topic_creation": False})
    assert [x.error_code for x in r.responses] == [ErrorCode.TOPIC_DELETION_DISABLED]
    assert md.topics[0].error_code == ErrorCode.NONE
