"""Real Kafka clients judge the wire protocol: the first bytes kcat, confluent-kafka, kafka-python
and aiokafka send decode here, and the record batches librdkafka and kafka-python produce, in every
compression codec, parse, validate and decode here. The captures are made by the tests."""

import asyncio
import shutil

import pytest
import trio
from capture_broker import API_VERSIONS, capture_broker

from protocol import record_batch as rb
from protocol.api import decode_request, peek_header
from protocol.errors import UnsupportedVersion
from protocol.record_validation import validate_client_batch

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MESSAGES = [(b"key-%d" % i, b"value-%d " % i * 20) for i in range(5)]
TIMEOUT = 30


def assert_batches_hold(capture, messages=MESSAGES, codec="none"):
    batches = capture.produce_batches()
    assert batches, "the client produced nothing"
    got = []
    for blob in batches:
        for pos, header in rb.iter_batches(blob):
            assert rb.CODEC_NAMES[header.compression] == codec
            rb.validate_batch(blob, pos, header)
            validate_client_batch(blob, pos, header)
            got += [(r.key, r.value) for r in rb.decode_records(blob, pos, header)]
    assert got == messages


def assert_first_request_is_api_versions(capture, version):
    frame = capture.first_frames[0]
    assert peek_header(frame)[:2] == (API_VERSIONS, version)
    req = decode_request(frame)
    assert req.header.client_id
    return req


def _confluent_produce(port, codec):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "compression.type": codec,
            "linger.ms": 50,
            "message.timeout.ms": TIMEOUT * 1000,
        }
    )
    for key, value in MESSAGES:
        producer.produce("t", value, key=key)
    assert producer.flush(TIMEOUT) == 0


@pytest.mark.parametrize("codec", CODECS)
async def test_confluent_kafka(codec):
    async with capture_broker() as capture:
        with trio.fail_after(TIMEOUT):
            await trio.to_thread.run_sync(_confluent_produce, capture.port, codec)
    req = assert_first_request_is_api_versions(capture, 3)
    assert req.body.client_software_name == "confluent-kafka-python"
    assert_batches_hold(capture, codec=codec)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is installed by make setup")
@pytest.mark.parametrize("codec", ["none", "zstd"])
async def test_kcat(codec):
    lines = b"".join(k + b":" + v + b"\n" for k, v in MESSAGES)
    async with capture_broker() as capture:
        with trio.fail_after(TIMEOUT):
            result = await trio.run_process(
                ["kcat", "-P", "-b", f"127.0.0.1:{capture.port}", "-t", "t", "-K", ":", "-z", codec],
                stdin=lines,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert result.returncode == 0, result.stderr
    req = assert_first_request_is_api_versions(capture, 3)
    assert req.body.client_software_name == "librdkafka"
    assert_batches_hold(capture, codec=codec)


def _kafka_python_produce(port, codec):
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}", compression_type=codec, linger_ms=50, request_timeout_ms=TIMEOUT * 1000
    )
    futures = [producer.send("t", value, key=key) for key, value in MESSAGES]
    for f in futures:
        f.get(timeout=TIMEOUT)
    producer.close(timeout=TIMEOUT)


@pytest.mark.parametrize("codec", CODECS)
async def test_kafka_python(codec):
    async with capture_broker() as capture:
        with trio.fail_after(TIMEOUT):
            await trio.to_thread.run_sync(_kafka_python_produce, capture.port, None if codec == "none" else codec)
    # kafka-python 3 opens with ApiVersions v4, which we do not serve: the v0 UNSUPPORTED_VERSION
    # answer makes it retry at v3, which decodes.
    first = capture.first_frames[0]
    assert peek_header(first)[:2] == (API_VERSIONS, 4)
    with pytest.raises(UnsupportedVersion):
        decode_request(first)
    versions = [r.api_version for r in capture.requests if r.api_key == API_VERSIONS]
    assert versions and versions[0] == 3
    # Idempotent by default: it asked for a producer id and stamped its batches with it.
    assert any(r.api_key == 22 for r in capture.requests)
    for blob in capture.produce_batches():
        for _, header in rb.iter_batches(blob):
            assert header.producer_id == 1000 and header.base_sequence >= 0
    assert_batches_hold(capture, codec=codec)


def _aiokafka_produce(port):
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=TIMEOUT * 1000)
        await producer.start()
        try:
            for key, value in MESSAGES:
                await producer.send_and_wait("t", value, key=key)
        finally:
            await producer.stop()

    asyncio.run(run())


async def test_aiokafka():
    async with capture_broker() as capture:
        with trio.fail_after(TIMEOUT):
            await trio.to_thread.run_sync(_aiokafka_produce, capture.port)
    req = assert_first_request_is_api_versions(capture, 0)
    assert req.header.client_id.startswith("aiokafka")
    assert_batches_hold(capture)
