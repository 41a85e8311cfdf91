"""A full disk takes a log dir offline, not the broker down (issue 15 part 4), with real brokers:
broker 1 keeps its log on a small tmpfs; when it fills, produce answers KAFKA_STORAGE_ERROR, the
broker writes Kafka's /log_dir_event_notification, the controller learns the offline replica from
the broker's LeaderAndIsr answer and moves the leadership to the in-sync follower, and every
acknowledged record is there. Skipped where tmpfs cannot be mounted (not root, or no mount)."""

import subprocess

import pytest
import trio
from replication_helpers import controller_of, wait_until_all_brokers_known

from client.connection import Connection
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow

KiB = 1024


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


async def metadata_of(broker, topic):
    async with Connection.open(broker.host, broker.port) as conn:
        md = await conn.request(ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return md.topics[0].partitions[0] if md.topics[0].partitions else None


async def test_a_full_log_dir_moves_leadership_and_loses_nothing_acknowledged(start_broker, zk, small_disk):
    brokers = {1: start_broker(1, log_dirs=str(small_disk / "logs")), 2: start_broker(2)}
    await wait_until_all_brokers_known(brokers)
    controller = brokers[controller_of(zk)]
    async with Connection.open(controller.host, controller.port) as conn:
        r = await conn.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": "t",
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10000,
            },
        )
    assert r.topics[0].error_code == ErrorCode.NONE
    with trio.fail_after(20):
        while (p := await metadata_of(brokers[1], "t")) is None or p.leader_id != 1 or len(p.isr_nodes) != 2:
            await trio.sleep(0.1)
    acknowledged, failed = [], None
    async with Connection.open(brokers[1].host, brokers[1].port) as conn:
        with trio.fail_after(60):
            for i in range(40):  # 40 x 256 KiB into a 3 MiB disk
                value = bytes([i]) * (256 * KiB)
                r = await conn.request(
                    ApiKey.PRODUCE,
                    {
                        "acks": -1,
                        "timeout_ms": 10000,
                        "topic_data": [
                            {
                                "name": "t",
                                "partition_data": [{"index": 0, "records": rb.build_batch([(b"%d" % i, value)])}],
                            }
                        ],
                    },
                )
                code = r.responses[0].partition_responses[0].error_code
                if code != ErrorCode.NONE:
                    failed = code
                    break
                acknowledged.append(i)
    assert failed == ErrorCode.KAFKA_STORAGE_ERROR and acknowledged
    with trio.fail_after(30):  # the controller moves the leadership to the in-sync follower
        while (p := await metadata_of(brokers[2], "t")) is None or p.leader_id != 2:
            await trio.sleep(0.1)
    async with Connection.open(brokers[2].host, brokers[2].port) as conn:
        got, offset = [], 0
        with trio.fail_after(30):
            while len(got) < len(acknowledged):
                f = await conn.request(
                    ApiKey.FETCH,
                    {
                        "replica_id": -1,
                        "max_wait_ms": 500,
                        "min_bytes": 1,
                        "max_bytes": 8 << 20,
                        "topics": [
                            {
                                "topic": "t",
                                "partitions": [
                                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 8 << 20}
                                ],
                            }
                        ],
                    },
                )
                data = f.responses[0].partitions[0].records or b""
                for pos, header in rb.iter_batches(data):
                    got += [int(r.key) for r in rb.decode_records(data, pos, header)]
                    offset = header.next_offset
    assert got[: len(acknowledged)] == acknowledged  # nothing acknowledged is lost
    log = brokers[1].log_tail(200000)
    assert "is offline" in log and "told the controller that log dir" in log
    assert brokers[1].alive  # the broker is still up and serving
    async with Connection.open(brokers[1].host, brokers[1].port) as conn:
        r = await conn.request(
            ApiKey.PRODUCE,
            {
                "acks": 1,
                "timeout_ms": 1000,
                "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": rb.build_batch([(None, b"x")])}]}
                ],
            },
        )
    assert r.responses[0].partition_responses[0].error_code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.KAFKA_STORAGE_ERROR,
    )
