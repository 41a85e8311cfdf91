"""`minikafka produce` against a real broker; kcat reads back."""

import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from replication_helpers import create_topic, log_bytes, partition_state, wait_for

from protocol import record_batch as rb

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CLI = [sys.executable, "-m", "minikafka_cli.main", "produce"]
ROOT = str(Path(__file__).resolve().parents[2])


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
        (
            ["--bootstrap-server", "127.0.0.1:1", "--topic", "t", "--acks", "1", "--producer-property"]
            + ["enable.idempotence=true"],
            2,
            "needs acks=all",
        ),
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


def _kcat_reader(bootstrap: str, topic: str) -> pexpect.spawn:
    """kcat consuming `topic` from the beginning, one value per line, as records arrive."""
    return pexpect.spawn(
        "kcat",
        ["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-u", "-q", "-X", "fetch.wait.max.ms=50"],
        encoding="utf-8",
        timeout=30,
    )


def test_typed_lines_go_out_as_they_are_typed_and_ctrl_c_reports_the_count(kafka_cluster, kafka_topic):
    """Issue 49: at a terminal each line is sent when typed (kcat reads it within 1 s, while the
    producer still waits for input); Ctrl-C then flushes, prints the count and exits 130."""
    topic = kafka_topic(partitions=1)
    bootstrap = kafka_cluster.bootstrap_servers
    reader = _kcat_reader(bootstrap, topic)
    producer = pexpect.spawn(
        sys.executable,
        ["-m", "minikafka_cli.main", "produce", "--bootstrap-server", bootstrap, "--topic", topic],
        cwd=ROOT,
        encoding="utf-8",
        timeout=30,
    )
    try:
        for text in ("first line", "second line", "third line"):
            producer.expect(">")  # the prompt: connected, reading
            producer.sendline(text)
            typed = time.monotonic()
            reader.expect(text, timeout=10)
            assert time.monotonic() - typed < 1.0, f"{text!r} took {time.monotonic() - typed:.2f} s to reach kcat"
            assert producer.isalive()
        producer.expect(">")
        producer.sendintr()
        producer.expect(pexpect.EOF)
        producer.close()
        output = producer.before
        assert "3 records acknowledged" in output, output
        assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
        assert producer.exitstatus == 130, (producer.exitstatus, producer.signalstatus, output)
    finally:
        producer.terminate(force=True)
        reader.terminate(force=True)


def test_what_cannot_succeed_fails_at_once_in_one_line(kafka_cluster, kafka_topic):
    """Issue 49: a partition the topic does not have is refused before anything is read, naming
    the range (it waited out the 2-minute delivery timeout before); a line without the key
    separator stops the input in Kafka's words, after the lines before it were sent."""
    topic = kafka_topic(partitions=5)
    bootstrap = kafka_cluster.bootstrap_servers
    started = time.monotonic()
    r = subprocess.run(
        CLI + ["--bootstrap-server", bootstrap, "--topic", topic, "--partition", "99"],
        input=b"x\n",
        capture_output=True,
        timeout=60,
    )
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.strip() == f"minikafka produce: partition 99 of topic {topic} does not exist: it has 5 (0..4)", err
    assert time.monotonic() - started < 15, "refused only after a wait"
    r = subprocess.run(
        CLI
        + ["--bootstrap-server", bootstrap, "--topic", topic, "--property", "parse.key=true"]
        + ["--property", "key.separator=:", "--partition", "0"],
        input=b"k1:one\nk2:two\nhhh\nk3:never\n",
        capture_output=True,
        timeout=60,
    )
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "No key separator found on line number 3: 'hhh'" in err and "Traceback" not in err, err
    assert r.stdout.decode().strip() == "2 records acknowledged"
    kcat = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%k=%s\\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert kcat.stdout.splitlines() == ["k1=one", "k2=two"]


@pytest.mark.kafka_cluster(auto_create_topics_enable="false")
def test_a_missing_topic_is_named_at_once_where_topics_are_not_created_on_first_use(kafka_cluster):
    started = time.monotonic()
    r = subprocess.run(
        CLI + ["--bootstrap-server", kafka_cluster.bootstrap_servers, "--topic", "never-created"],
        input=b"x\n",
        capture_output=True,
        timeout=60,
    )
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert "topic never-created does not exist" in err and "auto.create.topics.enable=false" in err, err
    assert len(err.strip().splitlines()) == 1 and time.monotonic() - started < 15, err
