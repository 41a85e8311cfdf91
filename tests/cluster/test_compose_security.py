"""`minikafka compose up --security sasl_ssl` (issue 20's compose option, issue 21's cluster): both
listeners of every broker speak SASL_SSL, replication included, and clients on the host use the
settings it prints (confluent-kafka) or writes (`client.properties`: our CLI, kafka-python).
Skipped, saying why, where no Docker engine answers."""

from __future__ import annotations

import subprocess
import sys

import pytest
from compose_helpers import consume_all, produce_during, running_cluster, skip_without_docker, wait_isr_full

from local_cluster import compose, compose_security

pytestmark = pytest.mark.slow

skip_without_docker("the secured compose cluster")

TOPIC = "secured-events"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    directory = tmp_path_factory.mktemp("compose-security")
    setup, override = compose_security.prepare(directory, "sasl_ssl")
    with running_cluster("minikafka-sec-test", (override,)) as cluster:
        compose_security.add_admin_credential(cluster.bootstrap, directory, setup)
        yield cluster, setup, directory


def test_clients_use_sasl_ssl_on_every_listener(secured):
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer

    cluster, setup, directory = secured
    conf = {"bootstrap.servers": cluster.bootstrap, **setup.librdkafka}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)
    wait_isr_full(cluster, TOPIC, client=setup.librdkafka)  # followers replicate over SASL_SSL
    produced = produce_during(cluster.bootstrap, TOPIC, 2, client=setup.librdkafka)
    assert not produced.failed and len(produced.acked) == produced.sent
    assert set(produced.acked) <= set(consume_all(cluster.bootstrap, TOPIC, client=setup.librdkafka))

    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=cluster.bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=setup.librdkafka["ssl.ca.location"],
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="admin",
        sasl_plain_password=setup.admin_password,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    assert set(produced.acked) <= {m.value for m in consumer}
    consumer.close()

    cli = subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", cluster.bootstrap,
         "--command-config", str(directory / "client.properties"), "--topic", TOPIC, "--from-beginning",
         "--max-messages", "10"],
        capture_output=True, text=True, timeout=120, cwd=compose.ROOT,
    )  # fmt: skip
    assert cli.returncode == 0 and len(cli.stdout.splitlines()) == 10, cli.stderr


def test_a_wrong_password_or_plaintext_is_refused(secured):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    cluster, setup, _ = secured
    for conf in ({**setup.librdkafka, "sasl.password": "wrong"}, {}):
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 3000, **conf})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=5)


ZK_PROBE = """
import sys
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
zk = KazooClient(hosts="zookeeper1:2181,zookeeper2:2181,zookeeper3:2181", connection_retry={"max_tries": 2}, command_retry={"max_tries": 0})
zk.start(10)
results = []
for name, attempt in (
    ("read admin credential", lambda: zk.get("/config/users/admin")),
    ("list brokers", lambda: zk.get_children("/brokers/ids")),
    ("write an ACL", lambda: zk.create("/kafka-acl/Topic/evil", b"{}", makepath=True)),
    ("bump the controller epoch", lambda: zk.set("/controller_epoch", b"2147483647")),
):
    try:
        attempt()
        results.append(name + ": ALLOWED")
    except KazooException as e:
        results.append(name + ": refused " + type(e).__name__)
print("\\n".join(results))
"""


def test_zookeeper_on_the_compose_network_refuses_a_client_without_the_login(secured):
    """Issue 34, attack 4 on compose: a process inside the cluster's network (here, one started
    in a broker container without the brokers' JAAS login) reads and writes nothing in ZooKeeper."""
    cluster, _setup, _directory = secured
    out = subprocess.run(
        ["docker", "exec", cluster.container("broker1"), "python", "-c", ZK_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 4 and all("refused" in line for line in lines), out.stdout
