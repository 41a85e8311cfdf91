"""Every Kafka 3.8 KafkaConfig key is known: accepted with Kafka's meaning, kept with no effect and
a reason, or refused with a reason (issue 38). broker/config_compat.py holds the keys minikafka
has no mechanism for."""

from pathlib import Path

import pytest

from broker.config import ConfigError, build_config
from broker.config_def import BROKER_CONFIG
from broker.dynamic_config import DynamicBrokerConfig

KAFKA_KEYS = [
    line.strip()
    for line in (Path(__file__).parent / "data" / "kafka_3_8_broker_config_keys.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def test_every_kafka_3_8_key_is_known():
    assert len(KAFKA_KEYS) > 300
    missing = [key for key in KAFKA_KEYS if key not in BROKER_CONFIG]
    assert missing == []


def test_every_compat_key_says_why_and_takes_kafkas_default():
    for key in BROKER_CONFIG.values():
        if key.compat:
            assert key.doc == key.compat and len(key.compat) > 30
            build_config({**BASE, key.name: str(key.default)})  # Kafka's default is always accepted


def test_alter_configs_validate_only_accepts_a_kerberos_key_as_kafka_does():
    dynamic = DynamicBrokerConfig(BASE, 1)
    for per_broker in (True, False):
        config = dynamic.validate({"sasl.kerberos.min.time.before.relogin": "120000"}, per_broker=per_broker)
        assert config["sasl.kerberos.min.time.before.relogin"] == 120000
    with pytest.raises(ConfigError, match="sasl.kerberos.min.time.before.relogin"):
        dynamic.validate({"sasl.kerberos.min.time.before.relogin": "soon"}, per_broker=True)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("process.roles", "broker,controller", "ZooKeeper mode only"),
        ("controller.quorum.voters", "1@h:9093", "ZooKeeper mode only"),
        ("remote.log.storage.system.enable", "true", "no tiered storage"),
        ("connections.max.reauth.ms", "60000", "KIP-368"),
        ("principal.builder.class", "com.example.Builder", "Java plugins"),
        ("metric.reporters", "com.example.Reporter", "other Java reporters are refused"),
        ("zookeeper.ssl.client.enable", "true", "not TLS"),
        ("delegation.token.secret.key", "s3cret", "no delegation tokens"),
        ("node.id", "7", "broker.id"),
    ],
)
def test_a_mechanism_minikafka_lacks_is_refused_with_its_reason(key, value, words):
    with pytest.raises(ConfigError, match=words):
        build_config({**BASE, key: value})


def test_accepted_values_that_ask_for_nothing_new():
    config = build_config(
        {
            **BASE,
            "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter",
            "node.id": "1",
            "socket.send.buffer.bytes": "1048576",
            "inter.broker.protocol.version": "3.8",
            "remote.log.manager.thread.pool.size": "4",
        }
    )
    assert config["socket.send.buffer.bytes"] == 1048576
    dynamic = DynamicBrokerConfig(BASE, 1)
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: socket.send.buffer.bytes"):
        dynamic.validate({"socket.send.buffer.bytes": "1"}, per_broker=True)
    with pytest.raises(ConfigError, match="not by rate"):
        dynamic.validate({"max.connection.creation.rate": "10"}, per_broker=True)
