"""ACL authorization (AclAuthorizer semantics) on a real 2-broker cluster: a user without ACLs can do
nothing, WRITE lets it produce but not read, ACL changes made through one broker apply on both
without a restart, and forged controller requests from a non-broker principal change nothing."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest
import trio
from admin_helpers import wait
from security_helpers import ADMIN, plain_jaas

from client.connection import Connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow
TIMEOUT = 60
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


def _broker(**extra) -> dict[str, str]:
    jaas = plain_jaas(*ADMIN, USERS)
    return {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "offsets.topic.replication.factor": "2",
        "offsets.topic.num.partitions": "4",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def _as(user: str) -> dict:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def _produce(bootstrap: str, user: str, value: bytes):
    from confluent_kafka import Producer

    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 10000, **_as(user)})
    producer.produce("orders", value, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(TIMEOUT)
    return errors[0] if errors else "no delivery report"


def _consume(bootstrap: str, user: str, group: str = "billing", protocol: str = "classic"):
    """The first record or the first error a consumer of `orders` in `group` gets, with the
    classic group protocol or KIP-848's consumer protocol."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            **_as(user),
        }
    )
    consumer.subscribe(["orders"])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg.error() or msg.value()
    finally:
        consumer.close()
    return None


def _cli(command: str, bootstrap: str, config) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka_cli.main",
            *shlex.split(command),
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_acls_decide_who_may_do_what_on_every_broker(start_broker, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: start_broker(i, **_broker()) for i in (1, 2)}
    b1, b2 = (brokers[i].endpoint("SASL_PLAINTEXT") for i in (1, 2))
    admin = AdminClient({"bootstrap.servers": b1, **_as("admin")})
    wait(lambda: (md := admin.list_topics(timeout=TIMEOUT)).controller_id >= 0 and len(md.brokers) == 2, "2 brokers")
    admin.create_topics([NewTopic("orders", 2, 2)])["orders"].result(TIMEOUT)
    # alice without ACLs: sees no topic, cannot produce, cannot consume
    alice = AdminClient({"bootstrap.servers": b2, **_as("alice")})
    assert "orders" not in alice.list_topics(timeout=TIMEOUT).topics
    assert _produce(b2, "alice", b"denied").name() == "TOPIC_AUTHORIZATION_FAILED"
    # the admin grants WRITE through the CLI (CreateAcls on broker 1); broker 2 applies it at once
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret";\n'
    )
    added = _cli("acls --add --allow-principal User:alice --operation Write --topic orders", b1, admin_config)
    assert added.returncode == 0, added.stdout + added.stderr
    wait(lambda: _produce(b2, "alice", b"allowed") is None, "alice's WRITE on broker 2")
    # ... but not READ: a consumer is refused the group, then the topic
    assert _consume(b2, "alice").name() in ("GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED")
    # DESCRIBE on a group finds its coordinator; its ConsumerGroupHeartbeat needs READ as well
    described = _cli(
        "acls --add --allow-principal User:alice --operation Describe --group billing-848", b1, admin_config
    )
    assert described.returncode == 0, described.stdout + described.stderr
    refused = _consume(b2, "alice", "billing-848", protocol="consumer")
    # (librdkafka makes a heartbeat's GROUP_AUTHORIZATION_FAILED a fatal error naming it)
    assert refused is not None and "Group authorization failed: ConsumerGroupHeartbeat" in refused.str(), refused
    listed = admin.list_consumer_groups().result(TIMEOUT).valid
    assert "billing-848" not in [g.group_id for g in listed]  # her heartbeat joined nothing
    listed = _cli("acls --list --topic orders", b2, admin_config)
    assert "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW" in listed.stdout, listed.stdout
    # bob has READ on the orders-prefixed topics and the group: he reads what alice wrote
    for command in (
        "acls --add --allow-principal User:bob --operation Read --topic ord --resource-pattern-type prefixed",
        "acls --add --allow-principal User:bob --operation Read --group billing",
        "acls --add --allow-principal User:bob --operation Read --group billing-848",
    ):
        assert _cli(command, b1, admin_config).returncode == 0
    wait(lambda: _consume(b2, "bob") == b"allowed", "bob reading through a prefixed ACL")
    wait(lambda: _consume(b2, "bob", "billing-848", "consumer") == b"allowed", "bob in a consumer-protocol group")
    # a non-broker principal (ANONYMOUS on the PLAINTEXT listener) forging controller requests
    before = admin.list_topics("orders", timeout=TIMEOUT).topics["orders"].partitions
    assert trio.run(_forge, brokers[2]) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 3
    after = admin.list_topics("orders", timeout=TIMEOUT).topics["orders"].partitions
    assert {p: (m.leader, m.isrs) for p, m in after.items()} == {p: (m.leader, m.isrs) for p, m in before.items()}
    # removing the ACL takes WRITE away again, on both brokers
    removed = _cli("acls --remove --allow-principal User:alice --operation Write --topic orders", b2, admin_config)
    assert "Removed (principal=User:alice" in removed.stdout, removed.stdout + removed.stderr
    wait(lambda: _produce(b1, "alice", b"denied again").name() == "TOPIC_AUTHORIZATION_FAILED", "WRITE removed")
    # without credentials for the cluster, the ACL APIs themselves are refused
    refused = _cli("acls --list", b1, _properties(tmp_path, "alice"))
    assert "CLUSTER_AUTHORIZATION_FAILED" in refused.stdout, refused.stdout + refused.stderr


def _properties(tmp_path, user: str):
    path = tmp_path / f"{user}.properties"
    path.write_text(
        f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\nsasl.password={USERS[user]}\n"
    )
    return path


async def _forge(broker) -> list[int]:
    host, port = broker.endpoints["PLAINTEXT"]
    async with Connection.open(host, port) as conn:
        stop = await conn.request(
            ApiKey.STOP_REPLICA,
            {
                "controller_id": 1,
                "controller_epoch": 2**31 - 1,
                "broker_epoch": -1,
                "topic_states": [
                    {
                        "topic_name": "orders",
                        "partition_states": [{"partition_index": 0, "leader_epoch": -2, "delete_partition": True}],
                    }
                ],
            },
            version=3,
        )
        update = await conn.request(
            ApiKey.UPDATE_METADATA,
            {
                "controller_id": 1,
                "controller_epoch": 2**31 - 1,
                "broker_epoch": -1,
                "topic_states": [],
                "live_brokers": [],
            },
        )
        leader = await conn.request(
            ApiKey.LEADER_AND_ISR,
            {
                "controller_id": 1,
                "controller_epoch": 2**31 - 1,
                "broker_epoch": -1,
                "topic_states": [],
                "live_leaders": [],
            },
        )
    return [stop.error_code, update.error_code, leader.error_code]
