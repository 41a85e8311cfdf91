"""Transaction verification (KIP-890 part 1) on real brokers: a transactional write that arrives
after its transaction was aborted (a Produce delayed in the network) is refused when
`transaction.partition.verification.enable` is true, and the partition's last stable offset keeps
up with its high watermark; with the key set to false (dynamically, as a cluster default) the
same late write is appended and opens a transaction nothing will end: the LSO stops below the HW.
The data partition is led by the broker that is not the transactional id's coordinator, so the
leader asks over the network with AddPartitionsToTxn v4 (VerifyOnly). The hanging transaction is
then found and ended with `minikafka transactions find-hanging` / `abort` (KIP-664)."""

import sys

import pytest
import trio
from txn_helpers import TXN_BROKER

from client.connection import Connection
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow
TXN_ID = "late-writer"


async def _until(fn, what: str, timeout_s: float = 30.0):
    with trio.fail_after(timeout_s):
        while True:
            value = await fn()
            if value:
                return value
            await trio.sleep(0.1)


async def _coordinator(conn: Connection) -> int:
    async def ask():
        r = await conn.request(ApiKey.FIND_COORDINATOR, {"key": TXN_ID, "key_type": 1}, version=3)
        return r.node_id if r.error_code == ErrorCode.NONE else None

    return await _until(ask, "the transaction coordinator")


async def _offsets(conn: Connection, topic: str) -> tuple[int, int]:
    """(high watermark, last stable offset) of partition 0."""
    out = []
    for isolation in (0, 1):
        r = await conn.request(
            ApiKey.LIST_OFFSETS,
            {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}
                        ],
                    }
                ],
            },
        )
        out.append(r.topics[0].partitions[0].offset)
    return out[0], out[1]


async def _produce(conn: Connection, topic: str, pid: int, epoch: int, seq: int) -> int:
    batch = rb.build_batch(
        [(b"k", f"v{seq}".encode())], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    r = await conn.request(
        ApiKey.PRODUCE,
        {
            "transactional_id": TXN_ID,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    return r.responses[0].partition_responses[0].error_code


async def _set_verification(conn: Connection, leader: Connection, enabled: bool) -> None:
    value = "true" if enabled else "false"
    r = await conn.request(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        {
            "resources": [
                {
                    "resource_type": 4,
                    "resource_name": "",
                    "configs": [
                        {"name": "transaction.partition.verification.enable", "config_operation": 0, "value": value}
                    ],
                }
            ],
            "validate_only": False,
        },
    )
    assert r.responses[0].error_code == ErrorCode.NONE, r

    async def applied():
        d = await leader.request(
            ApiKey.DESCRIBE_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": "",
                        "configuration_keys": ["transaction.partition.verification.enable"],
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        return d.results[0].configs and d.results[0].configs[0].value == value

    await _until(applied, "the dynamic config on the leader")


async def _aborted_then_late(coordinator: Connection, leader: Connection, topic: str) -> tuple[int, int, int]:
    """A transaction writes one record to `topic` and aborts; then its delayed second write
    arrives. Returns (the late write's error code, HW, LSO) once the abort is complete."""
    init = await coordinator.request(
        ApiKey.INIT_PRODUCER_ID, {"transactional_id": TXN_ID, "transaction_timeout_ms": 60000}, version=1
    )
    assert init.error_code == ErrorCode.NONE, init
    pid, epoch = init.producer_id, init.producer_epoch
    added = await coordinator.request(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        {
            "v3_and_below_transactional_id": TXN_ID,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
        version=3,
    )
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == ErrorCode.NONE
    assert await _produce(leader, topic, pid, epoch, 0) == ErrorCode.NONE
    ended = await coordinator.request(
        ApiKey.END_TXN, {"transactional_id": TXN_ID, "producer_id": pid, "producer_epoch": epoch, "committed": False}
    )
    assert ended.error_code == ErrorCode.NONE

    async def settled():
        hw, lso = await _offsets(leader, topic)
        return hw == lso == 2  # the record and the ABORT marker

    await _until(settled, "the abort marker")
    late = await _produce(leader, topic, pid, epoch, 1)
    hw, lso = await _offsets(leader, topic)
    return late, hw, lso


async def test_a_late_transactional_write_is_refused_with_verification_and_hangs_without(start_broker):
    brokers = {i: start_broker(i, **TXN_BROKER) for i in (1, 2)}
    async with Connection.open(brokers[1].host, brokers[1].port) as first:
        coordinator_id = await _coordinator(first)
        leader_id = 2 if coordinator_id == 1 else 1
        created = await first.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [leader_id]}],
                        "configs": [],
                    }
                    for name in ("late-on", "late-off")
                ],
                "timeout_ms": 30000,
                "validate_only": False,
            },
        )
        assert all(t.error_code in (ErrorCode.NONE, ErrorCode.NOT_CONTROLLER) for t in created.topics), created
    c, b = brokers[coordinator_id], brokers[leader_id]
    async with Connection.open(c.host, c.port) as coordinator, Connection.open(b.host, b.port) as leader:

        async def led():
            r = await leader.request(ApiKey.METADATA, {"topics": [{"name": "late-on"}, {"name": "late-off"}]})
            return all(t.partitions and t.partitions[0].leader_id == leader_id for t in r.topics)

        await _until(led, "the data partitions' leader")
        # verification on (the default): the late write is refused, the LSO is the HW
        late, hw, lso = await _aborted_then_late(coordinator, leader, "late-on")
        assert late == ErrorCode.INVALID_TXN_STATE
        assert hw == lso == 2
        await trio.sleep(1)
        assert await _offsets(leader, "late-on") == (2, 2)

        # verification off: the late write is appended and hangs the partition
        await _set_verification(coordinator, leader, False)
        late, hw, lso = await _aborted_then_late(coordinator, leader, "late-off")
        assert late == ErrorCode.NONE
        assert (hw, lso) == (3, 2)  # the stray record opened a transaction at offset 2
        await trio.sleep(1)
        assert await _offsets(leader, "late-off") == (3, 2)

        # the operators' view (KIP-664): find-hanging lists it, abort ends it, the LSO moves on
        bootstrap = f"{b.host}:{b.port}"
        assert await _cli(bootstrap, "find-hanging", "--topic", "late-on", "--max-transaction-timeout", "0") == []
        found = await _cli(bootstrap, "find-hanging", "--broker-id", str(leader_id), "--max-transaction-timeout", "0")
        assert [(row[0], row[1], row[5]) for row in found] == [("late-off", "0", "2")], found
        await _cli(bootstrap, "abort", "--topic", "late-off", "--partition", "0", "--start-offset", "2")

        async def ended():
            return await _offsets(leader, "late-off") == (4, 4)  # the stray record and its ABORT marker

        await _until(ended, "the LSO after the abort")
        assert await _cli(bootstrap, "find-hanging", "--topic", "late-off", "--max-transaction-timeout", "0") == []


async def _cli(bootstrap: str, *args: str) -> list[list[str]]:
    """`minikafka transactions ...`'s table rows (the header left out)."""
    r = await trio.run_process(
        [sys.executable, "-m", "minikafka_cli.main", "transactions", "--bootstrap-server", bootstrap, *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    return [line.split("\t") for line in lines[1:]] if lines and "\t" in lines[0] else []
