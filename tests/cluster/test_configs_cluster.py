"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on a real two-broker cluster, judged by
confluent-kafka's AdminClient and kafka-python's KafkaAdminClient; config changes take effect on
every broker without a restart (retention deletes segments on every replica, min.insync.replicas
changes acks=all at once); bad input is answered with Kafka's error codes and changes nothing."""

import time

import pytest
import trio
from admin_helpers import raw, wait
from group_helpers import create_topics
from replication_helpers import partition_state, produce

from client.connection import Connection
from protocol.errors import ErrorCode

TIMEOUT = 30


def admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def describe(broker, kind, name, keys=None):
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(kind, name)
    client = admin(broker)  # kept alive until the result is in
    entries = client.describe_configs([resource])[resource].result(TIMEOUT)
    return {k: (e.value, e.source) for k, e in entries.items() if keys is None or k in keys}


def describe_on(broker, topic, keys):
    """A topic's DescribeConfigs (v4) sent to `broker` itself: {key: (value, source)}."""
    resource = {"resource_type": 2, "resource_name": topic, "configuration_keys": sorted(keys)}
    r = raw(broker, 32, {"resources": [resource]}, version=4)
    assert r.results[0].error_code == ErrorCode.NONE, r.results[0].error_message
    return {c.name: (c.value, c.config_source) for c in r.results[0].configs}


def incremental(broker, kind, name, ops):
    """`ops`: [(key, "SET"|"DELETE"|"APPEND"|"SUBTRACT", value)] through confluent's AdminClient."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, op, v in ops]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    client = admin(broker)
    return client.incremental_alter_configs([resource])[resource].result(TIMEOUT)


DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def test_describe_alter_and_incremental_alter_with_real_clients(start_broker):
    from confluent_kafka.admin import ConfigResource
    from confluent_kafka.admin import ConfigSource as Src
    from kafka.admin import ConfigResource as KafkaPythonResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    brokers = [start_broker(1, log_retention_hours=48), start_broker(2)]
    create_topics(brokers[0].bootstrap, {"conf": 2}, rf=2)
    keys = {"retention.ms", "cleanup.policy", "min.insync.replicas", "segment.bytes"}
    before = describe(brokers[0], "topic", "conf", keys)
    assert before["retention.ms"] == (str(48 * 3600 * 1000), Src.STATIC_BROKER_CONFIG.value)
    assert before["segment.bytes"] == ("1073741824", Src.DEFAULT_CONFIG.value)
    # confluent sends a topic's DescribeConfigs to a broker of its choice: ask each one directly
    assert describe_on(brokers[1], "conf", keys)["retention.ms"] == (str(168 * 3600 * 1000), Src.DEFAULT_CONFIG.value)

    resource = ConfigResource("topic", "conf", set_config={"retention.ms": "60000", "min.insync.replicas": "2"})
    client = admin(brokers[1])
    assert client.alter_configs([resource])[resource].result(TIMEOUT) is None
    incremental(
        brokers[0], "topic", "conf", [("cleanup.policy", "APPEND", "compact"), ("segment.bytes", "SET", "4096")]
    )
    expected = {
        "retention.ms": ("60000", Src.DYNAMIC_TOPIC_CONFIG.value),
        "min.insync.replicas": ("2", Src.DYNAMIC_TOPIC_CONFIG.value),
        "cleanup.policy": ("delete,compact", Src.DYNAMIC_TOPIC_CONFIG.value),
        "segment.bytes": ("4096", Src.DYNAMIC_TOPIC_CONFIG.value),
    }
    assert describe(brokers[0], "topic", "conf", keys) == expected
    assert describe_on(brokers[0], "conf", keys) == expected
    assert describe_on(brokers[1], "conf", keys) == expected
    incremental(
        brokers[1], "topic", "conf", [("retention.ms", "DELETE", None), ("cleanup.policy", "SUBTRACT", "delete")]
    )
    after = describe(brokers[0], "topic", "conf", keys)
    assert after["retention.ms"] == (str(48 * 3600 * 1000), Src.STATIC_BROKER_CONFIG.value)
    assert after["cleanup.policy"] == ("compact", Src.DYNAMIC_TOPIC_CONFIG.value)

    # kafka-python reads the same values; its alter_configs (3.x) re-sends the dynamic configs it
    # described first, so the other overrides survive
    kp = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap)
    try:
        found = kp.describe_configs([KafkaPythonResource(ConfigResourceType.TOPIC, "conf")])
        topic = found["topic"]["conf"]
        assert topic["cleanup.policy"]["value"] == "compact"
        assert topic["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        kp.alter_configs([KafkaPythonResource(ConfigResourceType.TOPIC, "conf", configs={"retention.ms": "1234"})])
    finally:
        kp.close()
    after = describe(brokers[0], "topic", "conf", keys)
    assert after["retention.ms"] == ("1234", Src.DYNAMIC_TOPIC_CONFIG.value)
    assert after["cleanup.policy"] == ("compact", Src.DYNAMIC_TOPIC_CONFIG.value)
    # confluent's AlterConfigs replaces the whole set: what it does not name returns to default
    resource = ConfigResource("topic", "conf", set_config={"retention.ms": "4321"})
    assert client.alter_configs([resource])[resource].result(TIMEOUT) is None
    assert describe_on(brokers[1], "conf", keys)["cleanup.policy"] == ("delete", Src.DEFAULT_CONFIG.value)

    # a broker's own dynamic config, set through that broker, shows on it with its source
    incremental(brokers[1], "broker", "2", [("log.retention.ms", "SET", "7000")])
    broker_view = describe(brokers[1], "broker", "2", {"log.retention.ms", "broker.id"})
    assert broker_view == {
        "log.retention.ms": ("7000", Src.DYNAMIC_BROKER_CONFIG.value),
        "broker.id": ("2", Src.STATIC_BROKER_CONFIG.value),
    }
    assert describe(brokers[1], "topic", "conf", {"segment.ms"})["segment.ms"][1] == Src.DEFAULT_CONFIG.value

    # every Kafka 3.8 broker key is known (issue 38): a Kerberos key Kafka accepts is validated
    # and accepted; one for a mechanism minikafka lacks is refused with the reason
    kerberos = ConfigResource("broker", "2", set_config={"sasl.kerberos.min.time.before.relogin": "120000"})
    assert client.alter_configs([kerberos], validate_only=True)[kerberos].result(TIMEOUT) is None
    relogin = describe(brokers[1], "broker", "2", {"sasl.kerberos.min.time.before.relogin"})
    assert relogin == {"sasl.kerberos.min.time.before.relogin": ("60000", Src.DEFAULT_CONFIG.value)}  # nothing written
    rate = ConfigResource("broker", "2", set_config={"max.connection.creation.rate": "5"})
    with pytest.raises(Exception, match="not by rate"):
        client.alter_configs([rate], validate_only=True)[rate].result(TIMEOUT)


def test_wire_versions_of_describe_configs(start_broker):
    broker = start_broker(1)
    create_topics(broker.bootstrap, {"wire": 1})
    resources = [{"resource_type": 2, "resource_name": "wire", "configuration_keys": ["retention.ms", "preallocate"]}]
    v0 = raw(broker, 32, {"resources": resources}, version=0)
    entries = {c.name: c for c in v0.results[0].configs}
    assert set(entries) == {"retention.ms", "preallocate"} and entries["retention.ms"].is_default
    v4 = raw(
        broker,
        32,
        {"resources": resources, "include_synonyms": True, "include_documentation": True},
        version=4,
    )
    entries = {c.name: c for c in v4.results[0].configs}
    assert entries["retention.ms"].config_type == 5  # LONG
    assert "ms" in entries["retention.ms"].documentation
    assert [s.name for s in entries["retention.ms"].synonyms] == ["log.retention.hours"]
    everything = raw(
        broker, 32, {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]}, version=4
    )
    names = {c.name for c in everything.results[0].configs}
    assert {"broker.id", "log.dirs", "zookeeper.connect", "min.insync.replicas"} <= names


def test_a_config_change_takes_effect_on_every_broker_without_restart(start_broker, zk):
    settings = {"log_retention_check_interval_ms": 300, "log_segment_delete_delay_ms": 0}
    brokers = {i: start_broker(i, **settings) for i in (1, 2)}
    create_topics(brokers[1].bootstrap, {"live": 1}, rf=2)
    incremental(brokers[1], "topic", "live", [("segment.bytes", "SET", "1024")])
    leader = brokers[partition_state(zk, "live", 0)["leader"]]
    for _ in range(40):
        assert trio.run(produce, leader, "live", b"x" * 100, -1).error_code == ErrorCode.NONE

    def segments(b):
        return len(list((b.directory / "logs" / "live-0").glob("*.log")))

    wait(lambda: all(segments(b) > 3 for b in brokers.values()), "segments on both replicas")
    incremental(brokers[2], "topic", "live", [("retention.ms", "SET", "1")])
    wait(lambda: all(segments(b) == 1 for b in brokers.values()), "retention on every replica")

    # min.insync.replicas 3 on an RF-2 topic: acks=all is refused at once, acks=1 still works
    incremental(brokers[1], "topic", "live", [("min.insync.replicas", "SET", "3")])
    wait(
        lambda: trio.run(produce, leader, "live", b"y", -1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS,
        "NOT_ENOUGH_REPLICAS",
    )
    assert trio.run(produce, leader, "live", b"y", 1).error_code == ErrorCode.NONE
    incremental(brokers[1], "topic", "live", [("min.insync.replicas", "DELETE", None)])
    wait(lambda: trio.run(produce, leader, "live", b"z", -1).error_code == ErrorCode.NONE, "acks=all again")

    # the cluster-wide default (broker resource ""), through the AlterConfigs wire API
    r = raw(
        brokers[2],
        33,
        {
            "resources": [
                {"resource_type": 4, "resource_name": "", "configs": [{"name": "min.insync.replicas", "value": "3"}]}
            ],
            "validate_only": False,
        },
    )
    assert r.responses[0].error_code == ErrorCode.NONE
    wait(
        lambda: trio.run(produce, leader, "live", b"y", -1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS,
        "the default reaching the leader",
    )
    for b in brokers.values():  # each broker applies the notification on its own: wait for every one
        wait(
            lambda b=b: (
                describe(b, "broker", str(b.broker_id), {"min.insync.replicas"})
                == {"min.insync.replicas": ("3", DYNAMIC_DEFAULT)}
            ),
            f"the default on broker {b.broker_id}",
        )


def _alter_codes(broker, api_key, resources, validate_only=False):
    r = raw(broker, api_key, {"resources": resources, "validate_only": validate_only})
    return [(ErrorCode(x.error_code).name, x.error_message) for x in r.responses]


def test_bad_input_gets_kafkas_errors_and_changes_nothing(start_broker):
    broker = start_broker(1)
    create_topics(broker.bootstrap, {"bad": 1})
    before = describe(broker, "topic", "bad")
    topic = lambda configs: [{"resource_type": 2, "resource_name": "bad", "configs": configs}]  # noqa: E731
    cases = [
        (33, topic([{"name": "no.such.config", "value": "1"}]), "INVALID_CONFIG", "no.such.config"),
        (33, topic([{"name": "retention.ms", "value": "soon"}]), "INVALID_CONFIG", "retention.ms"),
        (33, topic([{"name": "min.insync.replicas", "value": "0"}]), "INVALID_CONFIG", "min.insync.replicas"),
        (33, topic([{"name": "preallocate", "value": "true"}]), "INVALID_CONFIG", "not implemented"),
        (
            33,
            [{"resource_type": 2, "resource_name": "missing", "configs": []}],
            "UNKNOWN_TOPIC_OR_PARTITION",
            "does not exist",
        ),
        (
            44,
            topic([{"name": "retention.ms", "config_operation": 2, "value": "5"}]),
            "INVALID_CONFIG",
            "append is not allowed",
        ),
        (
            44,
            topic([{"name": "retention.ms", "config_operation": 0, "value": "5"}] * 2),
            "INVALID_REQUEST",
            "duplicate",
        ),
        (
            44,
            [
                {
                    "resource_type": 4,
                    "resource_name": "1",
                    "configs": [{"name": "broker.id", "config_operation": 0, "value": "7"}],
                }
            ],
            "INVALID_CONFIG",
            "Cannot update these configs dynamically",
        ),
        (
            44,
            [{"resource_type": 4, "resource_name": "9", "configs": []}],
            "INVALID_REQUEST",
            "Unexpected broker id",
        ),
    ]
    for api_key, resources, code, words in cases:
        [(got, message)] = _alter_codes(broker, api_key, resources)
        assert got == code and words in message, (resources, got, message)
    # validate_only checks and writes nothing
    [(got, _)] = _alter_codes(broker, 33, topic([{"name": "retention.ms", "value": "5"}]), validate_only=True)
    assert got == "NONE"
    assert describe(broker, "topic", "bad") == before
    r = raw(broker, 32, {"resources": [{"resource_type": 2, "resource_name": "nope", "configuration_keys": None}]})
    assert r.results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_restarted_broker_keeps_dynamic_configs(start_broker):
    broker = start_broker(1)
    # librdkafka stalls if its first Metadata lists no brokers: ask once the broker knows itself
    wait(lambda: raw(broker, 3, {"topics": []}).brokers, "the broker's metadata")
    incremental(broker, "broker", "1", [("log.segment.bytes", "SET", "2048")])
    broker.stop()
    broker.start()
    wait(lambda: raw(broker, 3, {"topics": []}).brokers, "the restarted broker's metadata")
    assert describe(broker, "broker", "1", {"log.segment.bytes"}) == {"log.segment.bytes": ("2048", DYNAMIC_BROKER)}
    create_topics(broker.bootstrap, {"after": 1})
    assert describe(broker, "topic", "after", {"segment.bytes"}) == {"segment.bytes": ("2048", DYNAMIC_BROKER)}


def test_a_re_created_topic_runs_with_its_own_configs_on_every_broker(start_broker, zk):
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: start_broker(i) for i in (1, 2)}
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    create_topics(brokers[1].bootstrap, {"again": 2}, rf=2)
    incremental(brokers[1], "topic", "again", [("max.message.bytes", "SET", "200")])

    def produce_to_each_leader(size):
        codes = set()
        for p in (0, 1):
            leader = brokers[partition_state(zk, "again", p)["leader"]]

            async def one(p=p, leader=leader):
                async with Connection.open(leader.host, leader.port) as conn:
                    from protocol import record_batch as rb

                    r = await conn.request(
                        0,
                        {
                            "acks": 1,
                            "timeout_ms": 5000,
                            "topic_data": [
                                {
                                    "name": "again",
                                    "partition_data": [{"index": p, "records": rb.build_batch([(None, b"x" * size)])}],
                                }
                            ],
                        },
                    )
                return r.responses[0].partition_responses[0].error_code

            codes.add(ErrorCode(trio.run(one)).name)
        return codes

    wait(lambda: produce_to_each_leader(500) == {"MESSAGE_TOO_LARGE"}, "max.message.bytes on both leaders")
    admin.delete_topics(["again"])["again"].result(TIMEOUT)
    wait(lambda: not zk.exists("/brokers/topics/again"), "the deletion")
    time.sleep(1)
    admin.create_topics([NewTopic("again", 2, 2)])["again"].result(TIMEOUT)
    wait(lambda: produce_to_each_leader(500) == {"NONE"}, "the new topic's default max.message.bytes on both leaders")
