"""Broker process lifecycle: ZooKeeper registration, refusing a duplicate id, SIGTERM's clean
shutdown, and kill -9 + restart losing nothing acknowledged."""

import json
import subprocess
import sys

import pytest
import trio
from controller_stub import assign
from test_broker_errors import fetch_body, produce_body

from client.connection import Connection
from protocol import record_batch as rb
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes


def test_registration_json_and_duplicate_id(start_broker, zk):
    broker = start_broker(3, broker_rack="r1")
    data, stat = zk.get("/brokers/ids/3")
    info = json.loads(data)
    assert stat.ephemeralOwner != 0
    assert info["version"] == 5 and info["host"] == "127.0.0.1" and info["port"] == broker.port
    assert info["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"] and info["rack"] == "r1"
    assert info["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"} and info["jmx_port"] == -1
    assert json.loads(zk.get("/cluster/id")[0])["version"] == "1"
    with pytest.raises(Exception, match="already registered"):
        start_broker(3)
    assert broker.alive


def test_bad_configuration_is_one_clear_line(tmp_path):
    cmd = [sys.executable, "-m", "minikafka_cli.main", "broker", "--override"]
    for override, message in (
        ("broker.id=-4", "broker.id"),
        ("listeners=nonsense", "listeners"),
        ("zookeeper.connect=", "zookeeper.connect"),
        ("zookeeper.connect=nohost", "zookeeper"),
        ("log.segment.bytes=small", "log.segment.bytes"),
        ("num.partitions=0", "num.partitions"),
    ):
        key = override.split("=")[0]
        result = subprocess.run(
            cmd
            + [override]
            + ["--override", "broker.id=1"] * (key != "broker.id")
            + ["--override", "zookeeper.connect=127.0.0.1:1"] * (key != "zookeeper.connect"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    # ZooKeeper that does not answer: exit 1 after zookeeper.connection.timeout.ms, one clear line
    result = subprocess.run(
        cmd
        + [
            "broker.id=1",
            "--override",
            "zookeeper.connect=127.0.0.1:1",
            "--override",
            "zookeeper.connection.timeout.ms=500",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and "cannot start: ZooKeeper at 127.0.0.1:1 did not answer" in result.stderr


async def test_sigterm_is_a_clean_shutdown(start_broker, zk):
    broker = start_broker(1)
    await assign([broker], {"t": [[1]]})
    async with Connection.open(broker.host, broker.port) as conn:
        await conn.request(0, produce_body("t", 0, rb.build_batch([(None, b"x")] * 3)))
    assert await trio.to_thread.run_sync(broker.stop) == 0
    assert zk.exists("/brokers/ids/1") is None
    logs = broker.directory / "logs"
    assert (logs / ".kafka_cleanshutdown").exists()
    assert (logs / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    assert (logs / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    await trio.to_thread.run_sync(broker.start)
    assert "recovering" not in broker.log_tail(100000)


async def test_kill_9_and_restart_keeps_every_acknowledged_record(start_broker, zk):
    broker = start_broker(1)
    await assign([broker], {"t": [[1], [1]]})
    acked = {0: [], 1: []}
    async with Connection.open(broker.host, broker.port) as conn:
        for i in range(200):
            p = i % 2
            r = await conn.request(0, produce_body("t", p, rb.build_batch([(b"k%d" % i, b"v%d" % i)] * (1 + i % 3))))
            part = r.responses[0].partition_responses[0]
            assert part.error_code == ErrorCode.NONE
            acked[p] += [(part.base_offset + j, b"v%d" % i) for j in range(1 + i % 3)]
    broker.kill()
    await trio.to_thread.run_sync(broker.start)
    assert "no clean shutdown marker; recovering" in broker.log_tail(100000)

    # the restarted broker elects itself controller (once the killed one's session ends), at an epoch
    # this test cannot know in advance: the stub speaks as that controller, at its epoch
    def elected_again() -> bool:
        controller, registration = zk.exists("/controller"), zk.exists("/brokers/ids/1")
        return None not in (controller, registration) and controller.ephemeralOwner == registration.ephemeralOwner

    with trio.fail_after(60):
        while not await trio.to_thread.run_sync(elected_again):
            await trio.sleep(0.1)
    epoch = int(zk.get("/controller_epoch")[0])
    answered = (await assign([broker], {"t": [[1], [1]]}, leader_epoch=1, controller_epoch=epoch))[1]
    assert answered.error_code == ErrorCode.NONE, answered  # not STALE_CONTROLLER_EPOCH
    async with Connection.open(broker.host, broker.port) as conn:
        for p in (0, 1):
            got, offset = [], 0
            while True:
                f = (await conn.request(1, fetch_body("t", p, offset))).responses[0].partitions[0]
                assert f.error_code == ErrorCode.NONE
                records = [
                    (r.offset, r.value)
                    for pos, h in rb.iter_batches(f.records)
                    for r in rb.decode_records(f.records, pos, h)
                ]
                if not records:
                    break
                got += records
                offset = records[-1][0] + 1
            assert got == acked[p]


@pytest.mark.parametrize("taken", ["listeners", "metrics.port"])
def test_a_taken_port_is_one_clear_line_naming_it(tmp_path, zk, zk_connect, taken):
    """A listener (or metrics) port already bound by another process: exit 1 with Kafka's
    "failed to bind" as one line, not a traceback; the CLI's `cluster up` passes it on."""
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    listener = f"PLAINTEXT://127.0.0.1:{port}" if taken == "listeners" else "PLAINTEXT://127.0.0.1:0"
    try:
        result = subprocess.run(
            [sys.executable, "-m", "minikafka_cli.main", "broker"]
            + ["--override", "broker.id=1", "--override", f"zookeeper.connect={zk_connect}"]
            + ["--override", f"log.dirs={tmp_path / 'logs'}", "--override", f"listeners={listener}"]
            + ["--override", f"metrics.port={port if taken == 'metrics.port' else -1}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        holder.close()
    said = [line for line in result.stderr.splitlines() if line.startswith("minikafka broker:")]
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert len(said) == 1 and "cannot start" in said[0] and str(port) in said[0], result.stderr
    assert "in use" in said[0], said


def test_an_admin_client_bootstrapped_on_a_broker_just_started_is_served(start_broker):
    """A broker knows no broker until the controller's first UpdateMetadata (tens of ms after it
    registers). librdkafka's AdminClient that asked it for metadata in that window got "no
    brokers" (and a controller it could not find), never asked again and timed out after 60 s;
    the first Metadata now waits for the cluster."""
    from confluent_kafka.admin import AdminClient, NewTopic

    start_broker(1)
    start_broker(2)
    newest = start_broker(3)
    admin = AdminClient({"bootstrap.servers": newest.bootstrap})
    future = admin.create_topics([NewTopic("fresh", num_partitions=1, replica_assignment=[[3]])])["fresh"]
    assert future.result(20) is None
