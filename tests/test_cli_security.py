"""`minikafka cluster up --security sasl_ssl` as a user runs it: a secured local cluster whose
printed settings work for the CLI (`--command-config client.properties`) and for confluent-kafka,
and which refuses a client without them. Also `minikafka users` against it."""

from __future__ import annotations

import subprocess

import pytest
from test_cli_cluster import CLI, free_base_port

pytestmark = pytest.mark.slow


def cli(*args, timeout=120, input_text=None):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, input=input_text)


def _rdkafka_settings(stdout: str) -> dict[str, str]:
    line = next(line for line in stdout.splitlines() if "confluent-kafka / kcat:" in line)
    pairs = line.split(":", 1)[1].split(" -X ")
    return dict(p.replace("-X ", "").strip().split("=", 1) for p in pairs if "=" in p)


def test_cluster_up_with_sasl_ssl_prints_settings_that_work(tmp_path):
    d = tmp_path / "c"
    base = free_base_port(5)
    up = cli(
        "cluster",
        "up",
        "--dir",
        str(d),
        "--brokers",
        "2",
        "--zookeeper-port",
        str(base + 2),
        "--base-port",
        str(base),
        "--metrics-base-port",
        str(base + 3),
        "--security",
        "sasl_ssl",
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        config = d / "client.properties"
        text = config.read_text()
        assert "security.protocol=SASL_SSL" in text and "ScramLoginModule" in text and "ssl.truststore.location" in text
        bootstrap = f"127.0.0.1:{base}"
        common = ["--bootstrap-server", bootstrap, "--command-config", str(config)]
        r = cli("topics", "create", *common, "--topic", "secure", "--partitions", "2", "--replication-factor", "2")
        assert r.returncode == 0, r.stdout + r.stderr
        r = cli("produce", *common, "--topic", "secure", "--acks", "all", input_text="one\ntwo\nthree\n")
        assert r.returncode == 0, r.stdout + r.stderr
        r = cli("consume", *common, "--topic", "secure", "--from-beginning", "--max-messages", "3")
        assert sorted(r.stdout.split()) == ["one", "three", "two"], r.stdout + r.stderr
        # a user made with `minikafka users` (SCRAM-SHA-256) and the ACLs it needs
        r = cli("users", *common, "--add-scram", "--user", "reader", "--password", "reader-secret")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "reader\tSCRAM-SHA-256(iterations=4096)" in cli("users", *common, "--describe").stdout
        for args in (("--topic", "secure"), ("--group", "readers")):
            r = cli("acls", *common, "--add", "--allow-principal", "User:reader", "--operation", "Read", *args)
            assert r.returncode == 0, r.stdout + r.stderr
        from confluent_kafka import Consumer

        settings = _rdkafka_settings(up.stdout)
        settings.update(
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "reader", "sasl.password": "reader-secret"}
        )
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "readers", "auto.offset.reset": "earliest", **settings}
        )
        consumer.subscribe(["secure"])
        got = []
        try:
            for _ in range(120):
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg.value())
                if len(got) == 3:
                    break
        finally:
            consumer.close()
        assert sorted(got) == [b"one", b"three", b"two"]
        # without the settings: a TLS client that trusts nothing of ours, refused
        plain = cli("topics", "list", "--bootstrap-server", bootstrap, timeout=60)
        assert plain.returncode != 0
        status = cli("cluster", "status", "--dir", str(d))
        assert "controller:" in status.stdout and "offline partitions: 0" in status.stdout, (
            status.stdout + status.stderr
        )
    finally:
        cli("cluster", "down", "--dir", str(d))
