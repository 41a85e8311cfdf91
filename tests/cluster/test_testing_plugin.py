"""minikafka.testing (issue 38): docs/testing.md's example test file passes with confluent-kafka,
kafka-python, aiokafka and minikafka's client under a fresh pytest; nothing outlives the run, not
even when pytest is killed; the context manager works outside pytest, secured too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from readme_blocks import readme_block
from terminal_signals import sigint_as_in_a_terminal

from minikafka.testing import KafkaCluster

pytestmark = pytest.mark.slow


def _processes_under(path: Path) -> list[str]:
    """Command lines of live processes that name `path` (brokers' configs, ZooKeeper's zoo.cfg)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
        if str(path) in cmdline and state != "Z":
            out.append(f"{pid}: {cmdline[:200]}")
    return out


def _no_processes_within(path: Path, timeout_s: float = 15.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := _processes_under(path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def _pytest(directory: Path, *args: str) -> subprocess.Popen:
    """A new pytest process in `directory` (its own rootdir, the plugin from the entry point),
    with TMPDIR inside it so its clusters are found by path, and Ctrl-C's SIGINT handled."""
    tmp = directory / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )


def test_the_readme_example_passes_with_every_client_and_leaves_nothing(tmp_path):
    (tmp_path / "test_orders.py").write_text(readme_block("testing:example"))
    run = _pytest(tmp_path, "test_orders.py", "--durations=0")
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "5 passed" in out, out
    assert _no_processes_within(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []  # the clusters' directories are gone


def test_a_failing_test_still_gets_a_healed_cluster_and_a_clean_teardown(tmp_path):
    (tmp_path / "test_breaks.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.kafka_cluster(brokers=2)\n"
        "def test_breaks(kafka_cluster, kafka_topic):\n"
        "    kafka_topic()\n"
        "    kafka_cluster.kill(1)\n"
        "    kafka_cluster.pause(2)\n"
        "    assert False, 'on purpose'\n\n"
        "@pytest.mark.kafka_cluster(brokers=2)\n"
        "def test_next(kafka_cluster, admin):\n"
        "    assert sorted(admin.brokers()) == [1, 2]\n"
        "    assert admin.create_topic('next', 2, 2) == 'next'\n"
    )
    run = _pytest(tmp_path, "test_breaks.py")
    out, _ = run.communicate(timeout=300)
    assert "1 failed, 1 passed" in out, out
    assert _no_processes_within(tmp_path) == []


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_or_interrupted_run_leaves_no_process(tmp_path, how):
    """SIGKILL: the processes die with pytest (PR_SET_PDEATHSIG). SIGINT: pytest ends at once,
    without healing the cluster (no broker restarts, no wait for them), and kills it."""
    marker, healed = tmp_path / "cluster-is-up", tmp_path / "healed"
    (tmp_path / "test_waits.py").write_text(
        "import pathlib, time\n"
        "from minikafka.testing import KafkaCluster\n\n"
        "_heal = KafkaCluster.heal\n\n"
        "def _recorded_heal(self, *args, **kwargs):\n"
        f"    pathlib.Path({str(healed)!r}).write_text('')\n"
        "    return _heal(self, *args, **kwargs)\n\n"
        "KafkaCluster.heal = _recorded_heal\n\n"
        "def test_waits(kafka_cluster, kafka_topic):\n"
        "    kafka_topic()\n"
        f"    pathlib.Path({str(marker)!r}).write_text(kafka_cluster.bootstrap_servers)\n"
        "    time.sleep(600)\n"
    )
    run = _pytest(tmp_path, "test_waits.py")
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert run.poll() is None and time.monotonic() < deadline, run.communicate()[0]
        time.sleep(0.1)
    assert len(_processes_under(tmp_path)) >= 2  # ZooKeeper and the broker, found by path
    run.send_signal(how)
    try:
        out, _ = run.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # say where it is stuck, then end it
        stacks = subprocess.run(
            [str(Path(sys.executable).parent / "py-spy"), "dump", "--pid", str(run.pid)], capture_output=True, text=True
        )
        run.kill()
        pytest.fail(f"pytest did not end 120 s after {how.name}:\n{stacks.stdout}{stacks.stderr}")
    assert _no_processes_within(tmp_path) == []
    assert not healed.exists(), out
    if how == signal.SIGINT:
        assert "KeyboardInterrupt" in out, out


def test_the_context_manager_outside_pytest_and_secured():
    from confluent_kafka import Consumer, Producer

    with KafkaCluster(brokers=1, security="sasl_ssl") as cluster:
        directory = cluster.directory
        config = cluster.client_config("confluent-kafka")
        assert config["security.protocol"] == "SASL_SSL"
        producer = Producer(config)
        producer.produce("secured", b"hello")
        assert producer.flush(20) == 0
        consumer = Consumer({**config, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["secured"])
        message = consumer.poll(20)
        consumer.close()
        assert message is not None and message.error() is None and message.value() == b"hello"
        assert [r.value for r in cluster.admin().records("secured")] == [b"hello"]
        # a client without the admin's credentials is refused
        errors = []
        stranger = Producer({"bootstrap.servers": cluster.bootstrap_servers, "message.timeout.ms": 3000})
        stranger.produce("secured", b"x", on_delivery=lambda err, msg: errors.append(err))
        stranger.flush(10)
        assert len(errors) == 1 and errors[0] is not None
    assert not directory.exists()
    assert _processes_under(directory) == []


def test_a_broker_killed_or_stopped_by_id_starts_again_by_id():
    from confluent_kafka import Producer

    with KafkaCluster(brokers=2) as cluster:
        admin = cluster.admin()
        topic = admin.create_topic("restarted", 2, 2)
        cluster.kill(2)
        assert not cluster.brokers[2].alive
        assert cluster.start(2) is cluster and cluster.brokers[2].alive
        assert cluster.stop(1) == 0  # a controlled shutdown exits cleanly
        assert not cluster.brokers[1].alive
        cluster.start(1)
        assert sorted(admin.brokers()) == [1, 2]
        producer = Producer({**cluster.client_config("confluent-kafka"), "acks": "all"})
        producer.produce(topic, b"after both restarts", partition=0)
        assert producer.flush(30) == 0
        assert [r.value for r in admin.records(topic, partition=0)] == [b"after both restarts"]
