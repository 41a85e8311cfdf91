"""`minikafka produce` against a real broker; kcat reads back."""

import subprocess
import sys

import pytest
from replication_helpers import create_topic, log_bytes, partition_state, wait_for

from protocol import record_batch as rb

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CLI = [sys.executable, "-m", "minikafka_cli.main", "produce"]


async def test_cli_produce_keys_headers_and_idempotence(start_broker, zk, tmp_path):
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "c", partitions=1, rf=1)
    await wait_for(lambda: partition_state(zk, "c", 0)["leader"] == 1)
    lines = "".join(f"k{i}:value {i}\n" for i in range(50))
    r = subprocess.run(
        CLI
        + [
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "c",
            "--key-separator",
            ":",
            "--header",
            "source=cli",
            "--compression",
            "zstd",
        ],
        input=lines.encode(),
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "50 records acknowledged"
    kcat = subprocess.run(
        ["kcat", "-C", "-b", broker.bootstrap, "-t", "c", "-o", "beginning", "-e", "-f", "%k|%s|%h\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert kcat.stdout.splitlines() == [f"k{i}|value {i}|source=cli" for i in range(50)]
    headers = [h for _, h in rb.iter_batches(log_bytes(broker, "c", 0))]
    assert all(h.producer_id >= 0 for h in headers)  # idempotent by default
    path = tmp_path / "records.txt"
    path.write_text("one\ntwo\n")
    r = subprocess.run(
        CLI
        + [
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "c",
            "--file",
            str(path),
            "--no-idempotence",
            "--acks",
            "1",
        ],
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.decode().strip() == "2 records acknowledged"
    headers = [h for _, h in rb.iter_batches(log_bytes(broker, "c", 0))]
    assert headers[-1].producer_id == -1


def test_cli_produce_errors_are_one_line(tmp_path):
    cases = [
        (["--bootstrap-server", "127.0.0.1:1", "--topic", "t"], 1, "no broker reachable"),
        (["--bootstrap-server", "nohost", "--topic", "t"], 2, "not host:port"),
        (["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--acks", "1"], 2, "needs --no-idempotence"),
        (["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--header", "nope"], 2, "KEY=VALUE"),
        (["--topic", "t"], 2, "required"),
    ]
    for args, code, message in cases:
        r = subprocess.run(CLI + args, input=b"x\n", capture_output=True, text=False, timeout=60)
        err = r.stderr.decode()
        assert r.returncode == code, (args, err)
        assert message in err and "Traceback" not in err, (args, err)


async def test_produce_creates_a_missing_topic_and_consume_into_head_stops_quietly(start_broker, zk):
    """As Kafka's console producer: a missing topic is auto-created (auto.create.topics.enable,
    num.partitions); `consume | head` ends with SIGPIPE's status and no traceback."""
    broker = start_broker(1, num_partitions="2")
    lines = "".join(f"record {i:06d} " + "x" * 80 + "\n" for i in range(20_000))  # ~2 MB: more than a pipe holds
    r = subprocess.run(
        CLI + ["--bootstrap-server", broker.bootstrap, "--topic", "fresh"],
        input=lines.encode(),
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "20000 records acknowledged"
    assert {p: partition_state(zk, "fresh", p)["leader"] for p in (0, 1)} == {0: 1, 1: 1}
    consume = " ".join(
        [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", broker.bootstrap]
        + ["--topic", "fresh", "--from-beginning", "--timeout-ms", "20000"]
    )
    r = subprocess.run(
        ["bash", "-c", f"{consume} | head -3; exit ${{PIPESTATUS[0]}}"], capture_output=True, text=True, timeout=120
    )
    assert len(r.stdout.splitlines()) == 3 and r.stdout.startswith("record "), r.stdout
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    assert r.returncode == 141, (r.returncode, r.stderr)
