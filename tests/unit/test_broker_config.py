"""server.properties parsing and validation."""

import logging

import pytest

from broker.config import ConfigError, Listener, build_config, load_config, parse_properties


def test_java_properties_syntax():
    text = (
        "# comment\n! also\nbroker.id=1\nlog.dirs : /a,/b\nzookeeper.connect 127.0.0.1:2181\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,\\\n  INTERNAL://127.0.0.1:9093\n\n"
    )
    assert parse_properties(text) == {
        "broker.id": "1",
        "log.dirs": "/a,/b",
        "zookeeper.connect": "127.0.0.1:2181",
        "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
    }


def test_defaults_overrides_and_derived_values(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("broker.id=7\nzookeeper.connect=h:2181/kafka\nlog.retention.hours=2\nlog.segment.bytes=1000\n")
    config = load_config(path, ["min.insync.replicas=2", "listeners=PLAINTEXT://127.0.0.1:0"])
    assert config.broker_id == 7 and config["min.insync.replicas"] == 2 and config["num.partitions"] == 1
    assert config.listeners == [Listener("PLAINTEXT", "127.0.0.1", 0)] == config.advertised_listeners
    assert [str(d) for d in config.log_dirs] == ["/tmp/kafka-logs"]
    log_config = config.log_config()
    assert log_config.retention_ms == 2 * 3600 * 1000 and log_config.segment_bytes == 1000
    assert log_config.max_message_bytes == 1048588


@pytest.mark.parametrize(
    "props,key",
    [
        ({"zookeeper.connect": "h:1"}, "broker.id"),
        ({"broker.id": "1"}, "zookeeper.connect"),
        ({"broker.id": "one", "zookeeper.connect": "h:1"}, "broker.id"),
        ({"broker.id": "1", "zookeeper.connect": "h:1", "listeners": "PLAINTEXT://h"}, "listeners"),
        ({"broker.id": "1", "zookeeper.connect": "h:1", "listeners": "A://h:1,A://h:2"}, "listeners"),
        (
            {"broker.id": "1", "zookeeper.connect": "h:1", "auto.create.topics.enable": "maybe"},
            "auto.create.topics.enable",
        ),
        ({"broker.id": "1", "zookeeper.connect": "h:1", "log.segment.bytes": "10"}, "log.segment.bytes"),
        ({"broker.id": "1", "zookeeper.connect": "h"}, "zookeeper.connect"),
    ],
)
def test_invalid_values_name_their_key(props, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        build_config(props)


def test_unknown_keys_are_warned_about(caplog):
    with caplog.at_level(logging.WARNING):
        build_config({"broker.id": "1", "zookeeper.connect": "h:1", "no.such.key": "x"})
    assert "no.such.key" in caplog.text


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["broker.id"])
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_environment_variables_map_onto_config_keys():
    from broker.config import env_properties

    env = {
        "KAFKA_BROKER_ID": "4",
        "KAFKA_ZOOKEEPER_CONNECT": "zk:2181",
        "KAFKA_LOG_RETENTION_HOURS": "2",
        "PATH": "/bin",
        "KAFKA_": "x",
    }
    assert env_properties(env) == {"broker.id": "4", "zookeeper.connect": "zk:2181", "log.retention.hours": "2"}
    config = load_config(None, ["broker.id=5"], environ=env)
    assert config.broker_id == 5 and config.log_config().retention_ms == 2 * 3600 * 1000


def test_zookeeper_sasl_login_from_a_jaas_file_and_set_acl_needs_it(tmp_path, monkeypatch):
    """Kafka's ZooKeeper authentication: the DigestLoginModule of the JAAS file's Client section
    (named by java.security.auth.login.config, or KAFKA_OPTS' -D of it); zookeeper.set.acl
    without a login is a configuration error, as in Kafka."""
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        "// the brokers' login\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  username="kafka" password="s3cret";\n};\n'
        'KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b"; };\n'
    )
    base = {"broker.id": "1", "zookeeper.connect": "h:1"}
    config = build_config({**base, "java.security.auth.login.config": str(jaas), "zookeeper.set.acl": "true"})
    assert config.zookeeper_login() == ("kafka", "s3cret") and config["zookeeper.set.acl"] is True
    assert build_config(base).zookeeper_login(
        environ={"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={jaas}"}
    ) == (
        "kafka",
        "s3cret",
    )
    assert build_config(base).zookeeper_login(environ={}) is None
    with pytest.raises(ConfigError, match="zookeeper.set.acl"):
        build_config({**base, "zookeeper.set.acl": "true"})
    with pytest.raises(ConfigError, match="java.security.auth.login.config"):
        build_config({**base, "java.security.auth.login.config": str(tmp_path / "missing.conf")})
    jaas.write_text("Client { broken")
    with pytest.raises(ConfigError, match="JAAS"):
        build_config({**base, "java.security.auth.login.config": str(jaas)})
