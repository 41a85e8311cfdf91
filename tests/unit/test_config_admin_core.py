"""The socket-free core of the config admin APIs: DescribeConfigs entries (sources, synonyms,
values, types), AlterConfigs / IncrementalAlterConfigs operations, and the dynamic broker layers."""

import pytest

from broker.config import ConfigError
from broker.config_def import BROKER_CONFIG
from broker.config_helper import SOURCES, TYPES, describe_broker, describe_topic
from broker.config_ops import (
    APPEND,
    BROKER,
    DELETE,
    SET,
    SUBTRACT,
    TOPIC,
    ConfigOpError,
    apply_incremental,
    replace_all,
)
from broker.dynamic_config import RECONFIGURABLE, DynamicBrokerConfig
from protocol.errors import ErrorCode
from storage.config import TOPIC_CONFIGS, LogConfig
from storage.topic_configs import TopicConfigs

STATIC = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.retention.hours": "24"}


def test_every_config_has_a_type_and_documentation():
    """One table per scope (issue 35): every key carries its Kafka type, its documentation and
    (broker keys) whether it may change at runtime; a dynamic key has an effect."""
    for key in TOPIC_CONFIGS.values():
        assert key.type in TYPES and key.doc
    for name, key in BROKER_CONFIG.items():
        assert key.name == name and key.type in TYPES and key.doc
        assert not (key.dynamic and (key.fixed_because or not key.has_effect)), name
    assert RECONFIGURABLE == {name for name, key in BROKER_CONFIG.items() if key.dynamic}


def test_component_configs_are_derived_from_the_table():
    """The coordinators' and the cleaner's config dataclasses name their keys and hold no
    defaults of their own: `derive` fills them from the broker's config (issue 35)."""
    import dataclasses

    from broker.config import build_config, derive
    from coordinator.group.config import GroupCoordinatorConfig
    from coordinator.transaction.config import TransactionConfig
    from storage.cleaner.log_cleaner import CleanerConfig

    for cls in (GroupCoordinatorConfig, TransactionConfig, CleanerConfig):
        for f in dataclasses.fields(cls):
            if "key" in f.metadata:
                assert f.metadata["key"] in BROKER_CONFIG and f.default is dataclasses.MISSING, f.name
    config = build_config(STATIC | {"offsets.retention.minutes": "2", "transaction.state.log.min.isr": "1"})
    group = derive(GroupCoordinatorConfig, config, max_size=7)
    assert (group.offsets_topic_num_partitions, group.offsets_retention_ms, group.max_size) == (50, 120_000, 7)
    assert derive(TransactionConfig, config).min_isr == 1
    assert derive(CleanerConfig, config).backoff_ms == BROKER_CONFIG["log.cleaner.backoff.ms"].default


def _topic(dynamic, overrides):
    view = dynamic.validate(dynamic.per_broker, per_broker=True).topic_configs()
    view.set("t", overrides)
    return {
        e["name"]: e
        for e in describe_topic(
            view.overrides("t"),
            view.log_config("t"),
            dynamic,
            min_insync_replicas=view.min_insync_replicas("t"),
            unclean_leader_election_enable=view.unclean_leader_election_enable("t"),
        )
    }


def test_topic_entries_follow_the_synonym_chain():
    dynamic = DynamicBrokerConfig(STATIC, 1)
    entries = _topic(dynamic, {})
    assert set(entries) == set(TOPIC_CONFIGS)
    retention = entries["retention.ms"]
    # static log.retention.hours=24 and Kafka's default 168 both show; the static one wins
    assert retention["value"] == str(24 * 3600 * 1000)
    assert retention["config_source"] == SOURCES["STATIC_BROKER_CONFIG"]
    assert [(s["name"], s["value"], s["source"]) for s in retention["synonyms"]] == [
        ("log.retention.hours", "24", SOURCES["STATIC_BROKER_CONFIG"]),
        ("log.retention.hours", "168", SOURCES["DEFAULT_CONFIG"]),
    ]
    assert retention["config_type"] == TYPES["long"] and not retention["read_only"]
    assert entries["segment.bytes"]["config_source"] == SOURCES["DEFAULT_CONFIG"]
    assert entries["segment.bytes"]["value"] == "1073741824"
    assert entries["preallocate"]["value"] == "false" and entries["preallocate"]["synonyms"] == []
    assert entries["min.cleanable.dirty.ratio"]["value"] == "0.5"

    dynamic.update(cluster_default={"log.retention.ms": "5000"}, per_broker={"min.insync.replicas": "2"})
    entries = _topic(dynamic, {"cleanup.policy": "compact,delete"})
    assert entries["retention.ms"]["value"] == "5000"
    assert entries["retention.ms"]["config_source"] == SOURCES["DYNAMIC_DEFAULT_BROKER_CONFIG"]
    assert entries["min.insync.replicas"]["value"] == "2"
    assert entries["min.insync.replicas"]["config_source"] == SOURCES["DYNAMIC_BROKER_CONFIG"]
    policy = entries["cleanup.policy"]
    assert policy["value"] == "compact,delete" and policy["config_source"] == SOURCES["DYNAMIC_TOPIC_CONFIG"]
    assert [s["source"] for s in policy["synonyms"]] == [SOURCES["DYNAMIC_TOPIC_CONFIG"], SOURCES["DEFAULT_CONFIG"]]


def test_broker_entries_mark_what_can_change_at_runtime():
    dynamic = DynamicBrokerConfig(STATIC, 1)
    dynamic.update(cluster_default={"log.segment.bytes": "2048"})
    entries = {e["name"]: e for e in describe_broker(dynamic, per_broker=True)}
    assert entries["broker.id"]["read_only"] and entries["broker.id"]["value"] == "1"
    assert entries["broker.id"]["config_source"] == SOURCES["STATIC_BROKER_CONFIG"]
    assert not entries["log.segment.bytes"]["read_only"]
    assert entries["log.segment.bytes"]["value"] == "2048"
    assert entries["log.segment.bytes"]["config_source"] == SOURCES["DYNAMIC_DEFAULT_BROKER_CONFIG"]
    assert entries["log.retention.ms"]["value"] is None  # Kafka's: no default of its own
    assert entries["log.retention.ms"]["synonyms"][0]["name"] == "log.retention.hours"
    assert entries["auto.create.topics.enable"]["value"] == "true"
    # the <default> entity lists only what is set there
    assert [e["name"] for e in describe_broker(dynamic, per_broker=False)] == ["log.segment.bytes"]


def test_dynamic_layers_take_precedence_and_refuse_fixed_keys():
    dynamic = DynamicBrokerConfig(STATIC, 1)
    config = dynamic.update(per_broker={"log.retention.ms": "100"}, cluster_default={"log.retention.ms": "200"})
    assert config.log_config().retention_ms == 100
    config = dynamic.update(per_broker={})
    assert config.log_config().retention_ms == 200
    with pytest.raises(ConfigError, match="Cannot update these configs dynamically: broker.id"):
        dynamic.validate({"broker.id": "3"}, per_broker=True)
    with pytest.raises(ConfigError, match="thread pools"):
        dynamic.validate({"num.io.threads": "3"}, per_broker=True)
    with pytest.raises(ConfigError, match="Unknown broker configs: no.such.key"):
        dynamic.validate({"no.such.key": "3"}, per_broker=False)
    with pytest.raises(ConfigError, match="min.insync.replicas"):
        dynamic.validate({"min.insync.replicas": "0"}, per_broker=False)
    # a key another tool wrote that cannot change at runtime is left out, the rest applies
    config = dynamic.update(cluster_default={"broker.id": "9", "log.segment.bytes": "4096"})
    assert config.broker_id == 1 and config.log_config().segment_bytes == 4096


def test_incremental_operations():
    current = {"retention.ms": "1000", "cleanup.policy": "compact"}
    new = apply_incremental(
        TOPIC,
        current,
        [("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "delete"), ("segment.bytes", SET, "2048")],
    )
    assert new == {"cleanup.policy": "compact,delete", "segment.bytes": "2048"}
    assert apply_incremental(TOPIC, new, [("cleanup.policy", SUBTRACT, "compact")])["cleanup.policy"] == "delete"
    # APPEND to an unset list starts from Kafka's default, and adds nothing twice
    assert apply_incremental(TOPIC, {}, [("cleanup.policy", APPEND, "compact,delete")]) == {
        "cleanup.policy": "delete,compact"
    }
    assert apply_incremental(BROKER, {}, [("log.cleanup.policy", APPEND, "compact")]) == {
        "log.cleanup.policy": "delete,compact"
    }
    with pytest.raises(ConfigOpError, match="append is not allowed for config key: retention.ms") as e:
        apply_incremental(TOPIC, {}, [("retention.ms", APPEND, "1")])
    assert e.value.error_code == ErrorCode.INVALID_CONFIG
    with pytest.raises(ConfigOpError, match="duplicate") as e:
        apply_incremental(TOPIC, {}, [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)])
    assert e.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ConfigOpError, match="Null value") as e:
        apply_incremental(TOPIC, {}, [("retention.ms", SET, None)])
    assert e.value.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ConfigOpError, match="Unknown alter config operation"):
        apply_incremental(TOPIC, {}, [("retention.ms", 7, "1")])


def test_alter_configs_replaces_everything():
    assert replace_all([("retention.ms", "5")]) == {"retention.ms": "5"}
    with pytest.raises(ConfigOpError, match="Null value"):
        replace_all([("retention.ms", None)])


def test_topic_configs_take_new_defaults():
    configs = TopicConfigs(LogConfig(retention_ms=10))
    configs.set("t", {"segment.bytes": "1024"})
    assert configs.log_config("t").retention_ms == 10
    configs.set_defaults(LogConfig(retention_ms=20), min_insync_replicas=2, unclean_leader_election_enable=True)
    assert configs.log_config("t").retention_ms == 20 and configs.log_config("t").segment_bytes == 1024
    assert configs.min_insync_replicas("t") == 2 and configs.unclean_leader_election_enable("t")
