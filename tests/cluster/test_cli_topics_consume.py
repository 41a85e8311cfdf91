"""`minikafka topics` and `minikafka consume` against a real 3-broker cluster."""

import json
import subprocess
import sys

import pytest
import trio
from replication_helpers import partition_state, wait_for, wait_until_all_brokers_known

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CLI = [sys.executable, "-m", "minikafka_cli.main"]


def cli(*args, input=None, timeout=60):
    return subprocess.run(CLI + list(args), input=input, capture_output=True, text=True, timeout=timeout)


async def test_topics_and_consume(start_broker, zk):
    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await wait_until_all_brokers_known(brokers)
    bootstrap = brokers[1].bootstrap
    r = await trio.to_thread.run_sync(
        lambda: cli(
            "topics",
            "create",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "tc",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        )
    )
    assert r.returncode == 0 and r.stdout.strip() == "Created topic tc.", r.stderr
    r = await trio.to_thread.run_sync(lambda: cli("topics", "create", "--bootstrap-server", bootstrap, "--topic", "tc"))
    assert r.returncode == 1 and "TOPIC_ALREADY_EXISTS" in r.stderr
    await wait_for(lambda: all(len(partition_state(zk, "tc", p)["isr"]) == 3 for p in range(3)))
    r = await trio.to_thread.run_sync(
        lambda: cli("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "tc")
    )
    lines = r.stdout.splitlines()
    assert lines[0] == "Topic: tc\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2"
    assert all("Replicas: " in line and "Isr: " in line for line in lines[1:]) and len(lines) == 4
    assert (
        "tc" in (await trio.to_thread.run_sync(lambda: cli("topics", "list", "--bootstrap-server", bootstrap))).stdout
    )

    data = "".join(f"k{i % 5}:v{i}\n" for i in range(60))
    r = await trio.to_thread.run_sync(
        lambda: cli("produce", "--bootstrap-server", bootstrap, "--topic", "tc", "--key-separator", ":", input=data)
    )
    assert r.returncode == 0 and "60 records acknowledged" in r.stdout, r.stderr
    r = await trio.to_thread.run_sync(
        lambda: cli(
            "consume",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "tc",
            "--from-beginning",
            "--max-messages",
            "60",
            "--json",
        )
    )
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted(int(x["value"][1:]) for x in rows) == list(range(60))
    for key in {x["key"] for x in rows}:  # one key, one partition, in send order
        ordered = [int(x["value"][1:]) for x in rows if x["key"] == key]
        assert ordered == sorted(ordered) and len({x["partition"] for x in rows if x["key"] == key}) == 1
    r = await trio.to_thread.run_sync(
        lambda: cli(
            "consume",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "tc",
            "--partition",
            "0",
            "--offset",
            "1",
            "--timeout-ms",
            "500",
            "--print-partition",
            "--print-offset",
            "--print-key",
        )
    )
    first = r.stdout.splitlines()[0].split("\t")
    assert first[:2] == ["Partition:0", "Offset:1"] and r.returncode == 0 and "Processed a total of" in r.stderr
    r = await trio.to_thread.run_sync(
        lambda: cli("consume", "--bootstrap-server", bootstrap, "--topic", "nope", "--timeout-ms", "100")
    )
    assert r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr and "Traceback" not in r.stderr
    r = await trio.to_thread.run_sync(lambda: cli("topics", "delete", "--bootstrap-server", bootstrap, "--topic", "tc"))
    assert r.returncode == 0 and r.stdout.strip() == "Deleted topic tc."
