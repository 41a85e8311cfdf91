"""`minikafka perf` against a real broker, driven by our client and by confluent-kafka; the log
itself (and the other direction's reader) checks that the reported records are really there."""

import json
import subprocess
import sys

import pytest
from replication_helpers import create_topic, log_bytes, partition_state, wait_for

from protocol import record_batch as rb

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

PERF = [sys.executable, "-m", "minikafka_cli.main", "perf"]


def perf(*args, timeout=120) -> dict:
    r = subprocess.run(PERF + list(args) + ["--json"], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def records_in_log(broker, topic: str, partition: int = 0) -> int:
    return sum(h.records_count for _, h in rb.iter_batches(log_bytes(broker, topic, partition)))


async def test_perf_produce_consume_and_end_to_end_with_both_clients(start_broker, zk):
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "p", partitions=1, rf=1)
    await wait_for(lambda: partition_state(zk, "p", 0)["leader"] == 1)
    b = ["--bootstrap-server", broker.bootstrap, "--topic", "p"]
    ours = perf("produce", *b, "--num-records", "3000", "--record-size", "200", "--acks", "1")
    assert (ours["records"], ours["bytes"], ours["errors"], ours["client"]) == (3000, 600000, 0, "ours")
    assert ours["latency"]["count"] == 3000 and 0 < ours["latency"]["p50"] <= ours["latency"]["max"]
    confluent = perf("produce", *b, "--num-records", "20000", "--client", "confluent", "--compression", "lz4")
    assert (confluent["records"], confluent["errors"]) == (20000, 0)
    assert records_in_log(broker, "p") == 23000  # what both said they wrote is in the log
    # Each consumer reads the whole log back from the start.
    assert perf("consume", *b, "--num-records", "23000")["records"] == 23000
    got = perf("consume", *b, "--num-records", "23000", "--client", "confluent")
    assert got["records"] == 23000 and got["bytes"] == 3000 * 200 + 20000 * 100
    for client in ("ours", "confluent"):
        e2e = perf("end-to-end", *b, "--num-records", "300", "--throughput", "300", "--client", client)
        assert e2e["records"] == 300 and e2e["latency"]["count"] == 300
        assert 0 < e2e["latency"]["p50"] < 1000
    # issue 48: without --partition, end-to-end spreads its records over every partition
    await create_topic({1: broker}, zk, "spread", partitions=3, rf=1)
    await wait_for(lambda: all(partition_state(zk, "spread", p)["leader"] == 1 for p in range(3)))
    for client in ("ours", "confluent"):
        before = [records_in_log(broker, "spread", p) for p in range(3)]
        spread = ["--bootstrap-server", broker.bootstrap, "--topic", "spread", "--client", client]
        e2e = perf("end-to-end", *spread, "--num-records", "300", "--throughput", "600", "--linger-ms", "0")
        assert e2e["records"] == 300 and e2e["extra"]["partitions"] == 3, e2e
        grown = [records_in_log(broker, "spread", p) - before[p] for p in range(3)]
        assert all(n > 0 for n in grown) and sum(grown) >= 300, grown
    # Pacing: 600 records at 300/s take about two seconds.
    paced = perf("produce", *b, "--num-records", "600", "--throughput", "300", "--client", "confluent")
    assert 1.9 < paced["seconds"] < 4 and paced["records"] == 600


@pytest.mark.parametrize(
    "args, status, message",
    [
        (["produce", "--num-records", "0"], 2, "not a positive integer"),
        (["produce", "--num-records", "5", "--acks", "1", "--idempotence"], 2, "--idempotence needs --acks all"),
        (["produce", "--num-records", "5", "--client", "kcat"], 2, "invalid choice"),
        (["end-to-end", "--num-records", "5", "--record-size", "4"], 2, "at least 8"),
        (["produce", "--num-records", "5"], 1, "no broker reachable"),
        (
            ["consume", "--num-records", "5", "--client", "confluent", "--timeout", "3"],
            1,
            "no metadata for 'p' from 127.0.0.1:1",
        ),
    ],
)
def test_perf_errors_are_one_line(args, status, message):
    r = subprocess.run(
        PERF + args[:1] + ["--bootstrap-server", "127.0.0.1:1", "--topic", "p"] + args[1:],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == status, r.stderr
    lines = r.stderr.strip().splitlines()
    assert message in lines[-1] and lines[-1].startswith("minikafka perf"), r.stderr
    if status == 1:  # not argparse's usage + error: exactly one line, no traceback
        assert len(lines) == 1, r.stderr
