"""`minikafka cluster`: a local cluster in the background, driven only through the CLI."""

import json
import os
import re
import subprocess
import sys

import pytest

from local_cluster.ports import free_port_range

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

CLI = [sys.executable, "-m", "minikafka_cli.main"]


def free_base_port(count: int) -> int:
    """`count` consecutive free ports below the ephemeral range, reserved host-wide
    (`local_cluster.ports.free_port_range`): a fixed port inside that range can be taken, between
    this check and the broker's bind, by any other test's outgoing connection, and one below it
    by another test's picker unless reserved."""
    return free_port_range(count)


def cli(*args, timeout=120):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout)


def test_cluster_lifecycle(tmp_path):
    d = str(tmp_path / "c")
    base = free_base_port(7)
    metrics = base + 4
    r = cli(
        "cluster",
        "up",
        "--dir",
        d,
        "--brokers",
        "3",
        "--zookeeper-port",
        str(base + 3),
        "--base-port",
        str(base),
        "--metrics-base-port",
        str(metrics),
    )
    try:
        assert r.returncode == 0, r.stderr
        assert f"bootstrap servers: 127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}" in r.stdout
        for i in range(3):  # every broker's Prometheus endpoint, printed and recorded
            assert f"broker {i + 1} metrics: http://127.0.0.1:{metrics + i}/metrics" in r.stdout
        state = json.loads((tmp_path / "c" / "cluster.json").read_text())
        assert state["brokers"]["3"]["metrics_url"] == f"http://127.0.0.1:{metrics + 2}/metrics"
        pids = [b["pid"] for b in state["brokers"].values()] + [state["zookeeper"]["pid"]]
        assert (tmp_path / "c" / "broker-1" / "broker.pid").read_text().strip() == str(state["brokers"]["1"]["pid"])
        assert (tmp_path / "c" / "zookeeper" / "zookeeper.pid").exists()
        assert cli("cluster", "up", "--dir", d).returncode == 1  # already running
        bootstrap = f"127.0.0.1:{base}"
        assert (
            cli(
                "topics",
                "create",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                "t",
                "--partitions",
                "3",
                "--replication-factor",
                "3",
            ).returncode
            == 0
        )
        status = cli("cluster", "status", "--dir", d).stdout
        assert "broker 2: " in status and "controller: " in status and "topics: 1 (t)" in status
        # each broker's health from its own metrics: one active controller, the 3 leaders shared
        lines = [line for line in status.splitlines() if line.startswith("broker ")]
        assert sum("active controller" in line for line in lines) == 1, status
        assert sum(int(re.search(r"(\d+) leaders", line).group(1)) for line in lines) == 3, status
        assert all("0 under-replicated" in line for line in lines), status
        assert cli("cluster", "kill", "2", "--dir", d).stdout.strip() == "broker 2 killed"
        status = cli("cluster", "status", "--dir", d).stdout
        assert f"broker 2: 127.0.0.1:{base + 1} DOWN" in status
        assert cli("cluster", "start", "2", "--dir", d).returncode == 0
        assert cli("cluster", "stop", "3", "--dir", d).stdout.strip() == "broker 3 stopped"
        assert cli("cluster", "kill", "9", "--dir", d).returncode == 1
    finally:
        down = cli("cluster", "down", "--dir", d)
    assert down.returncode == 0 and down.stdout.strip() == "cluster down"
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive = (
                os.path.exists(f"/proc/{pid}")
                and "minikafka" in open(f"/proc/{pid}/cmdline").read()
                or "zoo.cfg" in open(f"/proc/{pid}/cmdline").read()
            )
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        assert not alive, pid


def test_cluster_errors_are_one_line(tmp_path):
    r = cli("cluster", "status", "--dir", str(tmp_path / "none"))
    assert r.returncode == 1 and "no cluster in" in r.stderr and "Traceback" not in r.stderr
    r = cli("cluster", "bogus")
    assert r.returncode == 2


def test_the_log_cleaner_state_in_status_and_describe(tmp_path):
    import time

    from confluent_kafka import Producer

    d = str(tmp_path / "c")
    base = free_base_port(5)
    r = cli(
        "cluster",
        "up",
        "--dir",
        d,
        "--brokers",
        "2",
        "--zookeeper-port",
        str(base + 2),
        "--base-port",
        str(base),
        "--metrics-base-port",
        str(base + 3),
        "--override",
        "log.cleaner.backoff.ms=200",
    )
    try:
        assert r.returncode == 0, r.stderr
        bootstrap = f"127.0.0.1:{base}"
        created = cli(
            "topics",
            "create",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "kv",
            "--partitions",
            "1",
            "--replication-factor",
            "2",
            "--config",
            "cleanup.policy=compact",
            "--config",
            "segment.bytes=8192",
            "--config",
            "min.cleanable.dirty.ratio=0.01",
        )
        assert created.returncode == 0, created.stderr
        assert "no compacted log cleaned yet" in cli("cluster", "status", "--dir", d).stdout
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "batch.size": 2000})
        for i in range(3000):
            producer.produce("kv", key=b"k%d" % (i % 20), value=b"v%d" % i + b"x" * 30)
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 60
        while True:
            status = cli("cluster", "status", "--dir", d).stdout
            if status.count("1 compacted logs cleaned, dirtiest kv-0") == 2:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.5)
        while True:  # a replica still receiving rolled segments after its first cleaning is dirty again
            described = cli("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "kv", "--dir", d).stdout
            if "DirtyRatio: 1:0." in described and ",2:0." in described:  # until its cleaner runs again
                break
            assert time.monotonic() < deadline, described
            time.sleep(0.5)
        elsewhere = cli("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "kv", "--dir", str(tmp_path))
        assert "DirtyRatio" not in elsewhere.stdout and "Partition: 0" in elsewhere.stdout
    finally:
        cli("cluster", "down", "--dir", d)
