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
        _zookeeper_is_locked(f"127.0.0.1:{base + 2}", d / "zookeeper-client.jaas")
    finally:
        cli("cluster", "down", "--dir", str(d))


def _zookeeper_is_locked(connect: str, jaas):
    """Issue 34, attack 4: a local process without the cluster's ZooKeeper login reads nothing
    (not the admin's SCRAM salt and keys, not even the broker list) and writes nothing; with the
    login, the znodes carry Kafka's ACLs (writable by the brokers' identity only, sensitive ones
    not world-readable)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import KazooException
    from kazoo.security import make_acl

    from security.jaas import zookeeper_client_login

    stranger = KazooClient(hosts=connect, connection_retry={"max_tries": 2}, command_retry={"max_tries": 0})
    stranger.start(10)
    try:
        for attempt in (
            lambda: stranger.get("/config/users/admin"),
            lambda: stranger.get_children("/brokers/ids"),
            lambda: stranger.create("/kafka-acl/Topic/evil", b"{}", makepath=True),
            lambda: stranger.set("/controller_epoch", b"2147483647"),
            lambda: stranger.delete("/brokers/topics/secure", recursive=True),
        ):
            with pytest.raises(KazooException):
                attempt()
    finally:
        stranger.stop()
        stranger.close()
    user, password = zookeeper_client_login(jaas.read_text())
    broker = KazooClient(
        hosts=connect, sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password}
    )
    broker.start(10)
    try:
        world_read = make_acl("world", "anyone", read=True)
        owner = make_acl("sasl", user, all=True)
        for path in ("/config/users/admin", "/config/users", "/config/brokers"):
            assert broker.get_acls(path)[0] == [owner], path
        for path in ("/brokers/ids/1", "/brokers/topics/secure", "/controller", "/config/topics/secure"):
            assert sorted(broker.get_acls(path)[0]) == sorted([owner, world_read]), path
    finally:
        broker.stop()
        broker.close()
