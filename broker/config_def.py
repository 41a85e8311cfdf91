"""The broker's config keys as one table (Kafka's `ConfigDef` for `KafkaConfig`): each key's
name, Kafka type (as DescribeConfigs v3+ reports it), parser (raises ValueError), default (None:
required, or none), one line of documentation (DescribeConfigs' `documentation`, in our own
words), and whether it may change at runtime in /config/brokers (`dynamic`, Kafka's
reconfigurable keys minikafka applies) or is one Kafka could change and minikafka cannot
(`fixed_because`, the reason AlterConfigs answers). A key without a parser is accepted and has no
effect (the thread-pool sizes: trio needs none).

Validation (`broker.config.build_config`), DescribeConfigs (`broker.config_helper`), dynamic
updates (`broker.dynamic_config`) and the docs read this table and nothing else. The topic
scope's table is `storage.config.TOPIC_CONFIGS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.config_compat import ALSO_ACCEPTED, COMPAT_KEYS, CompatKey
from storage.metadata_version import parse as _message_format_version


class ConfigError(ValueError):
    """An invalid or missing configuration value; the message names the key."""


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("must be true or false")
    return v == "true"


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


@dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` listener; port 0 binds an ephemeral port."""

    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listener:
        m = _LISTENER.match(text.strip())
        if not m or not 0 <= int(m.group(3)) <= 65535:
            raise ValueError(f"listener {text!r} is not NAME://host:port")
        return cls(m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def _listeners(value: str) -> list[Listener]:
    parsed = [Listener.parse(v) for v in _list(value)]
    if not parsed:
        raise ValueError("needs at least one listener")
    names = [lst.name for lst in parsed]
    if len(set(names)) != len(names):
        raise ValueError("listener names must be unique")
    return parsed


def _zk_connect(value: str) -> str:
    """`host:port[,host:port...][/chroot]`."""
    hosts, _, chroot = value.strip().partition("/")
    entries = [h.strip() for h in hosts.split(",")]
    if not hosts or any(not re.fullmatch(r"[A-Za-z0-9_.\-\[\]:]+:\d{1,5}", h) for h in entries):
        raise ValueError("must be host:port[,host:port...][/chroot]")
    if chroot and not re.fullmatch(r"[A-Za-z0-9_.\-/]+", chroot):
        raise ValueError(f"invalid chroot /{chroot}")
    return value.strip()


def _ip_overrides(value: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: `host:count,host:count` (Kafka's format)."""
    out = {}
    for item in _list(value):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not host:count")
        out[host.strip()] = int(count)
    return out


def _int_at_least(lo: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        n = int(value)
        if n < lo:
            raise ValueError(f"must be >= {lo}")
        return n

    return parse


def _float_in(lo: float, hi: float = math.inf) -> Callable[[str], float]:
    def parse(value: str) -> float:
        n = float(value)
        if not lo <= n <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return n

    return parse


RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"


def _replica_selector(value: str) -> str:
    """`replica.selector.class` (KIP-392): Kafka's two selectors by class name (or short name)."""
    for known in (RACK_AWARE_SELECTOR, LEADER_SELECTOR):
        if value.strip() in (known, known.rsplit(".", 1)[1]):
            return known
    if not value.strip():
        return ""
    raise ValueError(f"must be {RACK_AWARE_SELECTOR} or {LEADER_SELECTOR} (other selectors are Java classes)")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # Kafka's type name: int, long, double, boolean, string, list, password, class
    parse: Callable[[str], Any] | None  # None: accepted with no effect
    default: Any  # None: required (broker.id, zookeeper.connect) or no default
    doc: str
    dynamic: bool = False  # may be set in /config/brokers/* and applied at once
    fixed_because: str | None = None  # Kafka may change it at runtime; minikafka cannot, for this reason
    compat: str | None = None  # a Kafka key minikafka has no mechanism for: what it does instead (config_compat)

    @property
    def has_effect(self) -> bool:
        return self.parse is not None


def _rebalance_protocols(value: str) -> list[str]:
    protocols = [v.lower() for v in _list(value)]
    unknown = [p for p in protocols if p not in ("classic", "consumer")]
    if unknown or "classic" not in protocols:
        raise ValueError("must list classic and may list consumer")
    return protocols


def _assignors(value: str) -> list[str]:
    from coordinator.group.assignors import ASSIGNORS, CLASS_NAMES

    names = [CLASS_NAMES.get(v, v) for v in _list(value)]
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        raise ValueError(f"must name assignors among {sorted(ASSIGNORS)}: {unknown or 'none given'}")
    return names


def _one_of(*choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        v = value.strip().lower()
        if v not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return v

    return parse


def _key(
    name: str,
    type_name: str,
    parse: Callable[[str], Any] | None,
    default: Any,
    doc: str,
    *,
    dynamic: bool = False,
    fixed_because: str | None = None,
) -> ConfigKey:
    return ConfigKey(name, type_name, parse, default, doc, dynamic, fixed_because)


#: every broker config key minikafka knows, by name; defaults are Kafka's
BROKER_CONFIG: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        _key("broker.id", "int", _int_at_least(0), None, "This broker's id, unique in the cluster."),
        _key(
            "listeners",
            "list",
            _listeners,
            "PLAINTEXT://:9092",
            "The NAME://host:port endpoints the broker binds (port 0: an ephemeral port).",
            fixed_because="listeners are fixed at startup in minikafka",
        ),
        _key(
            "advertised.listeners",
            "list",
            _listeners,
            "",
            "The endpoints published in ZooKeeper for clients (default: listeners).",
            fixed_because="listeners are fixed at startup in minikafka",
        ),
        _key(
            "control.plane.listener.name",
            "string",
            lambda v: v.strip().upper(),
            "",
            "The listener reserved for the controller's requests.",
        ),
        _key(
            "zookeeper.connect",
            "string",
            _zk_connect,
            None,
            "host:port[,host:port...][/chroot] of the ZooKeeper ensemble.",
        ),
        _key("zookeeper.session.timeout.ms", "int", _int_at_least(1), 18000, "The ZooKeeper session timeout, in ms."),
        _key(
            "zookeeper.connection.timeout.ms",
            "int",
            _int_at_least(1),
            18000,
            "How long, in ms, to wait for a ZooKeeper connection.",
        ),
        # ZooKeeper security (Kafka's docs, "ZooKeeper Authentication"): znodes created with ACLs
        # (the broker's SASL identity may write, the world may read all but the sensitive ones), and
        # the JAAS file whose `Client` section holds the DIGEST-MD5 login (Kafka reads it from the
        # JVM property of this name; minikafka from this key or the environment's KAFKA_OPTS)
        _key(
            "zookeeper.set.acl",
            "boolean",
            _bool,
            False,
            "Create znodes with Kafka's secure ACLs (the broker's SASL identity may write; sensitive ones unreadable to others). Needs a ZooKeeper SASL login.",
        ),
        _key(
            "java.security.auth.login.config",
            "string",
            str,
            "",
            "A JAAS file whose Client section holds the broker's ZooKeeper SASL DIGEST-MD5 login (Kafka's JVM property of this name; KAFKA_OPTS' -D of it is read too).",
        ),
        _key(
            "zookeeper.sasl.clientconfig",
            "string",
            str,
            "Client",
            "The JAAS section of the ZooKeeper login (default Client).",
        ),
        _key(
            "quota.window.num", "int", _int_at_least(2), 11, "The number of samples kept in memory for client quotas."
        ),
        _key(
            "quota.window.size.seconds",
            "int",
            _int_at_least(1),
            1,
            "The time span of each sample for client quotas, in seconds.",
        ),
        _key("log.dirs", "list", _list, "", "The directories partition logs are kept in (default: log.dir)."),
        _key("log.dir", "string", _list, "/tmp/kafka-logs", "The log directory used when log.dirs is not set."),
        _key("num.partitions", "int", _int_at_least(1), 1, "The partition count of topics created without one."),
        _key(
            "default.replication.factor",
            "int",
            _int_at_least(1),
            1,
            "The replication factor of topics created without one.",
        ),
        _key(
            "min.insync.replicas",
            "int",
            _int_at_least(1),
            1,
            "The broker's default for the topic config min.insync.replicas.",
            dynamic=True,
        ),
        _key(
            "message.max.bytes",
            "int",
            _int_at_least(0),
            1048588,
            "The broker's default for the topic config max.message.bytes: the largest batch accepted, in bytes.",
            dynamic=True,
        ),
        _key(
            "socket.request.max.bytes",
            "int",
            _int_at_least(1),
            104857600,
            "The largest request frame, in bytes; larger ones close the connection.",
        ),
        _key(
            "connections.max.idle.ms",
            "long",
            _int_at_least(1),
            600000,
            "Idle connections are closed after this many ms.",
        ),
        _key(
            "max.connections",
            "int",
            _int_at_least(0),
            (1 << 31) - 1,
            "The most client connections the broker accepts.",
            fixed_because="connection limits are fixed at startup in minikafka",
        ),
        _key(
            "queued.max.requests",
            "int",
            _int_at_least(1),
            500,
            "Requests doing their ordered work at once, across all connections (a Produce holds its place while it appends, not while it waits for replication).",
        ),
        _key(
            "queued.max.request.bytes",
            "long",
            int,
            -1,
            "Bytes of the requests in progress across all connections before a connection waits to start its next one (-1: no bound).",
        ),
        _key(
            "max.connections.per.ip",
            "int",
            _int_at_least(0),
            (1 << 31) - 1,
            "The most connections accepted from one address.",
            fixed_because="connection limits are fixed at startup in minikafka",
        ),
        _key(
            "max.connections.per.ip.overrides",
            "string",
            _ip_overrides,
            "",
            "Per-address exceptions to max.connections.per.ip.",
            fixed_because="connection limits are fixed at startup in minikafka",
        ),
        _key(
            "replica.lag.time.max.ms",
            "long",
            _int_at_least(1),
            30000,
            "A follower that has not caught up for this long, in ms, leaves the ISR.",
        ),
        _key(
            "replica.fetch.max.bytes",
            "int",
            _int_at_least(0),
            1048576,
            "Bytes a follower asks for per partition in one fetch.",
        ),
        _key(
            "replica.fetch.wait.max.ms",
            "int",
            _int_at_least(0),
            500,
            "How long, in ms, a follower's fetch waits on the leader for data.",
        ),
        _key(
            "replica.fetch.min.bytes",
            "int",
            _int_at_least(1),
            1,
            "Bytes a follower's fetch waits for before being answered.",
        ),
        _key(
            "replica.fetch.response.max.bytes",
            "int",
            _int_at_least(0),
            10485760,
            "Bytes a follower asks for in one whole fetch response.",
        ),
        _key(
            "replica.fetch.backoff.ms",
            "int",
            _int_at_least(0),
            1000,
            "How long, in ms, a follower waits after a failed fetch.",
        ),
        _key(
            "max.incremental.fetch.session.cache.slots",
            "int",
            _int_at_least(0),
            1000,
            "The most incremental fetch sessions (KIP-227) kept.",
        ),
        _key(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            _int_at_least(1),
            5000,
            "How often, in ms, high watermarks are checkpointed.",
        ),
        _key(
            "auto.create.topics.enable",
            "boolean",
            _bool,
            True,
            "Whether Metadata and Produce for a missing topic create it.",
        ),
        _key("delete.topic.enable", "boolean", _bool, True, "Whether DeleteTopics is allowed."),
        _key(
            "unclean.leader.election.enable",
            "boolean",
            _bool,
            False,
            "The broker's default for the topic config unclean.leader.election.enable.",
            dynamic=True,
        ),
        _key(
            "controlled.shutdown.enable",
            "boolean",
            _bool,
            True,
            "Whether a stopping broker first hands its leaderships over.",
        ),
        _key(
            "controlled.shutdown.max.retries", "int", _int_at_least(0), 3, "How often a controlled shutdown is retried."
        ),
        _key(
            "controlled.shutdown.retry.backoff.ms",
            "long",
            _int_at_least(0),
            5000,
            "The wait, in ms, between controlled shutdown attempts.",
        ),
        _key(
            "auto.leader.rebalance.enable",
            "boolean",
            _bool,
            True,
            "Whether the controller moves leaders back to preferred replicas.",
        ),
        _key(
            "leader.imbalance.check.interval.seconds",
            "long",
            _int_at_least(1),
            300,
            "How often, in s, the controller checks leader balance.",
        ),
        _key("broker.rack", "string", str, "", "The rack of this broker (registered in ZooKeeper)."),
        _key(
            "replica.selector.class",
            "class",
            _replica_selector,
            "",
            "The replica a consumer with a client.rack reads from (KIP-392): RackAwareReplicaSelector picks a caught-up replica in its rack; unset or LeaderSelector, the leader.",
        ),
        # Prometheus metrics (metrics/): -1 off, 0 any free port; served on metrics.host (all: "")
        _key(
            "metrics.port",
            "int",
            _int_at_least(-1),
            -1,
            "Port of the Prometheus /metrics endpoint (minikafka's; -1 off, 0 any free port).",
        ),
        _key("metrics.host", "string", str, "", "Interface the Prometheus endpoint binds (minikafka's; empty: all)."),
        _key(
            "producer.id.expiration.ms",
            "int",
            _int_at_least(1),
            86400000,
            "How long, in ms, an idle producer id's state is kept.",
        ),
        _key(
            "log.segment.bytes",
            "int",
            _int_at_least(14),
            1073741824,
            "The broker's default for the topic config segment.bytes.",
            dynamic=True,
        ),
        _key(
            "log.roll.ms",
            "long",
            int,
            None,
            "The broker's default for the topic config segment.ms (over log.roll.hours).",
            dynamic=True,
        ),
        _key(
            "log.roll.hours",
            "int",
            _int_at_least(1),
            168,
            "The broker's default for the topic config segment.ms, in hours.",
            dynamic=True,
        ),
        _key(
            "log.retention.ms",
            "long",
            int,
            None,
            "The broker's default for the topic config retention.ms (over minutes and hours).",
            dynamic=True,
        ),
        _key(
            "log.retention.minutes",
            "int",
            int,
            None,
            "The broker's default for the topic config retention.ms, in minutes (over hours).",
            dynamic=True,
        ),
        _key(
            "log.retention.hours",
            "int",
            int,
            168,
            "The broker's default for the topic config retention.ms, in hours.",
            dynamic=True,
        ),
        _key(
            "log.retention.bytes",
            "long",
            int,
            -1,
            "The broker's default for the topic config retention.bytes.",
            dynamic=True,
        ),
        _key(
            "log.retention.check.interval.ms",
            "long",
            _int_at_least(1),
            300000,
            "How often, in ms, logs are checked for segments to delete.",
        ),
        _key(
            "log.index.size.max.bytes",
            "int",
            _int_at_least(4),
            10485760,
            "The broker's default for the topic config segment.index.bytes.",
            dynamic=True,
        ),
        _key(
            "log.index.interval.bytes",
            "int",
            _int_at_least(0),
            4096,
            "The broker's default for the topic config index.interval.bytes.",
            dynamic=True,
        ),
        _key(
            "log.flush.interval.messages",
            "long",
            _int_at_least(1),
            (1 << 63) - 1,
            "The broker's default for the topic config flush.messages.",
            dynamic=True,
        ),
        _key(
            "log.flush.interval.ms",
            "long",
            int,
            None,
            "The broker's default for the topic config flush.ms.",
            dynamic=True,
        ),
        _key(
            "log.flush.scheduler.interval.ms",
            "long",
            _int_at_least(1),
            1000,
            "How often, in ms, logs are checked for a due flush.",
        ),
        _key(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            _int_at_least(1),
            60000,
            "How often, in ms, recovery points are checkpointed.",
        ),
        _key(
            "log.message.format.version",
            "string",
            _message_format_version,
            "3.0-IV1",
            "The broker's default for the topic config message.format.version: ignored since Kafka 3.0 (every batch is v2), but it must name a Kafka version.",
            dynamic=True,
        ),
        _key(
            "log.message.timestamp.type",
            "string",
            str,
            "CreateTime",
            "The broker's default for the topic config message.timestamp.type.",
            dynamic=True,
        ),
        _key(
            "log.segment.delete.delay.ms",
            "long",
            _int_at_least(0),
            60000,
            "The broker's default for the topic config file.delete.delay.ms.",
            dynamic=True,
        ),
        # the broker-wide defaults of topic configs (validated together by `log_config()`)
        _key(
            "log.roll.jitter.ms",
            "long",
            int,
            None,
            "The broker's default for the topic config segment.jitter.ms.",
            dynamic=True,
        ),
        _key(
            "log.roll.jitter.hours",
            "int",
            _int_at_least(0),
            0,
            "The broker's default for the topic config segment.jitter.ms, in hours.",
            dynamic=True,
        ),
        _key(
            "log.message.timestamp.difference.max.ms",
            "long",
            _int_at_least(0),
            None,
            "The broker's default for the topic config message.timestamp.difference.max.ms.",
            dynamic=True,
        ),
        _key(
            "log.message.timestamp.before.max.ms",
            "long",
            _int_at_least(0),
            None,
            "The broker's default for the topic config message.timestamp.before.max.ms.",
            dynamic=True,
        ),
        _key(
            "log.message.timestamp.after.max.ms",
            "long",
            _int_at_least(0),
            None,
            "The broker's default for the topic config message.timestamp.after.max.ms.",
            dynamic=True,
        ),
        _key(
            "compression.type",
            "string",
            str,
            "producer",
            "The broker's default for the topic config compression.type.",
            dynamic=True,
        ),
        _key(
            "compression.gzip.level",
            "int",
            int,
            -1,
            "The broker's default for the topic config compression.gzip.level.",
            dynamic=True,
        ),
        _key(
            "compression.lz4.level",
            "int",
            int,
            9,
            "The broker's default for the topic config compression.lz4.level.",
            dynamic=True,
        ),
        _key(
            "compression.zstd.level",
            "int",
            int,
            3,
            "The broker's default for the topic config compression.zstd.level.",
            dynamic=True,
        ),
        # the log cleaner (Kafka's CleanerConfig); the per-log defaults are LogConfig's (log_config())
        _key("log.cleaner.enable", "boolean", _bool, True, "Whether the log cleaner runs (compacted topics need it)."),
        _key(
            "log.cleaner.threads",
            "int",
            _int_at_least(1),
            1,
            "How many logs are cleaned at once.",
            fixed_because="the log cleaner's thread count is fixed at startup in minikafka",
        ),
        _key(
            "log.cleaner.dedupe.buffer.size",
            "long",
            _int_at_least(1),
            134217728,
            "Memory, in bytes, for the cleaners' key-to-offset maps.",
            fixed_because="the log cleaner's buffers are fixed at startup in minikafka",
        ),
        _key(
            "log.cleaner.io.buffer.load.factor",
            "double",
            _float_in(0.01, 1),
            0.9,
            "How full a cleaner's key-to-offset map may get.",
            fixed_because="the log cleaner's buffers are fixed at startup in minikafka",
        ),
        _key(
            "log.cleaner.io.buffer.size",
            "int",
            _int_at_least(1),
            524288,
            "The cleaners' read and write buffer size, in bytes.",
            fixed_because="the log cleaner's buffers are fixed at startup in minikafka",
        ),
        _key(
            "log.cleaner.io.max.bytes.per.second",
            "double",
            _float_in(1),
            math.inf,
            "The cleaners' combined read and write rate bound.",
            fixed_because="the log cleaner's throttle is fixed at startup in minikafka",
        ),
        _key(
            "log.cleaner.backoff.ms",
            "long",
            _int_at_least(0),
            15000,
            "How long, in ms, a cleaner sleeps when no log needs cleaning.",
            fixed_because="the log cleaner's backoff is fixed at startup in minikafka",
        ),
        _key(
            "log.cleanup.policy",
            "list",
            str,
            "delete",
            "The broker's default for the topic config cleanup.policy.",
            dynamic=True,
        ),
        _key(
            "log.cleaner.min.cleanable.ratio",
            "double",
            _float_in(0, 1),
            0.5,
            "The broker's default for the topic config min.cleanable.dirty.ratio.",
            dynamic=True,
        ),
        _key(
            "log.cleaner.delete.retention.ms",
            "long",
            _int_at_least(0),
            86400000,
            "The broker's default for the topic config delete.retention.ms.",
            dynamic=True,
        ),
        _key(
            "log.cleaner.min.compaction.lag.ms",
            "long",
            _int_at_least(0),
            0,
            "The broker's default for the topic config min.compaction.lag.ms.",
            dynamic=True,
        ),
        _key(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            _int_at_least(1),
            (1 << 63) - 1,
            "The broker's default for the topic config max.compaction.lag.ms.",
            dynamic=True,
        ),
        # the group coordinator (Kafka's GroupCoordinatorConfig / OffsetConfig)
        _key("offsets.topic.num.partitions", "int", _int_at_least(1), 50, "The partition count of __consumer_offsets."),
        _key(
            "offsets.topic.replication.factor",
            "short",
            _int_at_least(1),
            3,
            "The replication factor of __consumer_offsets.",
        ),
        _key(
            "offsets.topic.segment.bytes",
            "int",
            _int_at_least(1),
            104857600,
            "The segment size, in bytes, of __consumer_offsets.",
        ),
        _key(
            "offsets.topic.compression.codec",
            "int",
            _int_at_least(0),
            0,
            "The codec id used for __consumer_offsets writes.",
        ),
        _key(
            "offsets.load.buffer.size",
            "int",
            _int_at_least(1),
            5242880,
            "Bytes read at once while loading a group coordinator partition.",
        ),
        _key(
            "offsets.commit.timeout.ms",
            "int",
            _int_at_least(1),
            5000,
            "How long, in ms, an offset commit waits for its replicas.",
        ),
        _key(
            "offsets.retention.minutes",
            "int",
            _int_at_least(1),
            10080,
            "How long committed offsets of an empty group are kept, in minutes.",
        ),
        _key(
            "offsets.retention.check.interval.ms",
            "long",
            _int_at_least(1),
            600000,
            "How often, in ms, expired offsets are removed.",
        ),
        _key(
            "offset.metadata.max.bytes",
            "int",
            _int_at_least(0),
            4096,
            "The longest metadata string of a committed offset.",
        ),
        _key(
            "group.initial.rebalance.delay.ms",
            "int",
            _int_at_least(0),
            3000,
            "How long, in ms, a new group waits for more members.",
        ),
        _key(
            "group.min.session.timeout.ms",
            "int",
            _int_at_least(0),
            6000,
            "The shortest session timeout, in ms, a member may ask for.",
        ),
        _key(
            "group.max.session.timeout.ms",
            "int",
            _int_at_least(0),
            1800000,
            "The longest session timeout, in ms, a member may ask for.",
        ),
        _key("group.max.size", "int", _int_at_least(1), (1 << 31) - 1, "The most members one group may have."),
        # KIP-848's consumer group protocol (Kafka 4's GroupCoordinatorConfig defaults)
        _key(
            "group.coordinator.rebalance.protocols",
            "list",
            _rebalance_protocols,
            "classic,consumer",
            "The group protocols the coordinator serves: classic (JoinGroup/SyncGroup) and consumer (KIP-848).",
        ),
        _key(
            "group.consumer.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            5000,
            "The heartbeat interval, in ms, the coordinator gives consumer-protocol members.",
        ),
        _key(
            "group.consumer.min.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            5000,
            "The shortest heartbeat interval, in ms, of consumer-protocol groups.",
        ),
        _key(
            "group.consumer.max.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            15000,
            "The longest heartbeat interval, in ms, of consumer-protocol groups.",
        ),
        _key(
            "group.consumer.session.timeout.ms",
            "int",
            _int_at_least(1),
            45000,
            "How long, in ms, a consumer-protocol member lives without a heartbeat.",
        ),
        _key(
            "group.consumer.min.session.timeout.ms",
            "int",
            _int_at_least(1),
            45000,
            "The shortest session timeout, in ms, of consumer-protocol groups.",
        ),
        _key(
            "group.consumer.max.session.timeout.ms",
            "int",
            _int_at_least(1),
            60000,
            "The longest session timeout, in ms, of consumer-protocol groups.",
        ),
        _key(
            "group.consumer.max.size",
            "int",
            _int_at_least(1),
            (1 << 31) - 1,
            "The most members one consumer-protocol group may have.",
        ),
        # KIP-932's share groups (Kafka 4.2's defaults)
        _key(
            "group.share.enable",
            "boolean",
            _bool,
            True,
            "Whether share groups are served (Kafka 4.2: on, as share.version 1 is on a new cluster); false "
            "leaves their APIs out of ApiVersions and share.version at finalized level 0.",
        ),
        _key(
            "group.share.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            5000,
            "The heartbeat interval, in ms, the coordinator gives share group members.",
        ),
        _key(
            "group.share.session.timeout.ms",
            "int",
            _int_at_least(1),
            45000,
            "How long, in ms, a share group member lives without a heartbeat.",
        ),
        _key(
            "group.share.min.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            5000,
            "The shortest heartbeat interval, in ms, of share groups.",
        ),
        _key(
            "group.share.max.heartbeat.interval.ms",
            "int",
            _int_at_least(1),
            15000,
            "The longest heartbeat interval, in ms, of share groups.",
        ),
        _key(
            "group.share.min.session.timeout.ms",
            "int",
            _int_at_least(1),
            45000,
            "The shortest session timeout, in ms, of share groups.",
        ),
        _key(
            "group.share.max.session.timeout.ms",
            "int",
            _int_at_least(1),
            60000,
            "The longest session timeout, in ms, of share groups.",
        ),
        _key(
            "group.share.min.record.lock.duration.ms",
            "int",
            _int_at_least(1000),
            15000,
            "The shortest record lock duration, in ms, of share groups.",
        ),
        _key(
            "group.share.max.record.lock.duration.ms",
            "int",
            _int_at_least(1000),
            60000,
            "The longest record lock duration, in ms, of share groups.",
        ),
        _key(
            "group.share.max.size",
            "int",
            _int_at_least(1),
            200,
            "The most members one share group may have.",
        ),
        _key(
            "telemetry.max.bytes",
            "int",
            _int_at_least(1),
            1048576,
            "The largest PushTelemetry metrics payload, in bytes, a client may send (KIP-714).",
        ),
        _key(
            "telemetry.max.client.instances",
            "int",
            _int_at_least(1),
            10000,
            "minikafka's own: the most client instances whose pushed metrics a broker keeps (KIP-714); "
            "past it a new instance's metrics are dropped and counted.",
        ),
        _key(
            "telemetry.max.series",
            "int",
            _int_at_least(1),
            100000,
            "minikafka's own: the most pushed metric series a broker keeps over all client instances; "
            "past it new series are dropped and counted.",
        ),
        _key(
            "group.share.record.lock.duration.ms",
            "int",
            _int_at_least(1000),
            30000,
            "How long, in ms, a share consumer holds the records it acquired before they are released.",
        ),
        _key(
            "group.share.delivery.count.limit",
            "int",
            _int_at_least(2),
            5,
            "How many times a record of a share group is delivered before it is archived.",
        ),
        _key(
            "group.share.partition.max.record.locks",
            "int",
            _int_at_least(100),
            2000,
            "The most records of one partition a share group holds acquired at once.",
        ),
        _key(
            "group.consumer.assignors",
            "list",
            _assignors,
            "uniform,range",
            "The server-side assignors (uniform, range or Kafka's class names); the first is the default.",
        ),
        _key(
            "group.consumer.migration.policy",
            "string",
            _one_of("disabled", "upgrade", "downgrade", "bidirectional"),
            "bidirectional",
            "Which online conversions between classic and consumer groups are allowed (KIP-848).",
        ),
        # the share coordinator (KIP-932; Kafka's ShareCoordinatorConfig)
        _key(
            "share.coordinator.state.topic.num.partitions",
            "int",
            _int_at_least(1),
            50,
            "The partition count of __share_group_state.",
        ),
        _key(
            "share.coordinator.state.topic.replication.factor",
            "short",
            _int_at_least(1),
            3,
            "The replication factor of __share_group_state.",
        ),
        _key(
            "share.coordinator.state.topic.min.isr",
            "short",
            _int_at_least(1),
            2,
            "min.insync.replicas of __share_group_state.",
        ),
        _key(
            "share.coordinator.state.topic.segment.bytes",
            "int",
            _int_at_least(1),
            104857600,
            "The segment size, in bytes, of __share_group_state.",
        ),
        _key(
            "share.coordinator.load.buffer.size",
            "int",
            _int_at_least(1),
            5242880,
            "Bytes read at a time while loading __share_group_state.",
        ),
        _key(
            "share.coordinator.snapshot.update.records.per.snapshot",
            "int",
            _int_at_least(0),
            500,
            "How many update records a share-partition's state takes before the next write is a snapshot.",
        ),
        _key(
            "share.coordinator.write.timeout.ms",
            "int",
            _int_at_least(1),
            5000,
            "How long, in ms, a write to __share_group_state waits for its replicas.",
        ),
        _key(
            "share.coordinator.state.topic.prune.interval.ms",
            "int",
            _int_at_least(1),
            300000,
            "How often, in ms, the share coordinator deletes the records of __share_group_state no state needs.",
        ),
        # the transaction coordinator (Kafka's TransactionStateManagerConfig / TransactionLogConfig)
        _key(
            "transaction.state.log.num.partitions",
            "int",
            _int_at_least(1),
            50,
            "The partition count of __transaction_state.",
        ),
        _key(
            "transaction.state.log.replication.factor",
            "short",
            _int_at_least(1),
            3,
            "The replication factor of __transaction_state.",
        ),
        _key(
            "transaction.state.log.min.isr", "int", _int_at_least(1), 2, "min.insync.replicas of __transaction_state."
        ),
        _key(
            "transaction.state.log.segment.bytes",
            "int",
            _int_at_least(1),
            104857600,
            "The segment size, in bytes, of __transaction_state.",
        ),
        _key(
            "transaction.state.log.load.buffer.size",
            "int",
            _int_at_least(1),
            5242880,
            "Bytes read at a time while loading __transaction_state.",
        ),
        _key(
            "transaction.partition.verification.enable",
            "boolean",
            _bool,
            True,
            "Whether a partition leader asks the transaction coordinator that a transactional "
            "Produce belongs to an ongoing transaction before appending it (KIP-890 part 1).",
            dynamic=True,
        ),
        _key(
            "transaction.max.timeout.ms",
            "int",
            _int_at_least(1),
            900000,
            "The largest transaction timeout, in ms, a producer may ask for.",
        ),
        _key(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            _int_at_least(1),
            10000,
            "How often, in ms, transactions past their timeout are aborted.",
        ),
        _key(
            "transactional.id.expiration.ms",
            "int",
            _int_at_least(1),
            604800000,
            "Idle time, in ms, after which a transactional id is forgotten.",
        ),
        _key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            _int_at_least(1),
            3600000,
            "How often, in ms, expired transactional ids are removed.",
        ),
        # security (security/config.py reads them, per listener where Kafka allows
        # `listener.name.<listener>.<key>`)
        _key(
            "listener.security.protocol.map",
            "string",
            str,
            "",
            "NAME:PROTOCOL pairs: each listener's security protocol.",
        ),
        _key("inter.broker.listener.name", "string", str, "", "The listener brokers use to reach each other."),
        _key(
            "security.inter.broker.protocol",
            "string",
            str,
            "",
            "The inter-broker protocol, when no listener name is given.",
        ),
        _key(
            "sasl.enabled.mechanisms",
            "list",
            str,
            "GSSAPI",
            "The SASL mechanisms SASL listeners offer (PLAIN, SCRAM-SHA-256/512).",
        ),
        _key(
            "sasl.mechanism.inter.broker.protocol",
            "string",
            str,
            "GSSAPI",
            "The SASL mechanism brokers use with each other.",
        ),
        _key(
            "sasl.jaas.config",
            "password",
            str,
            "",
            "JAAS login module settings (users for PLAIN, the broker's own login).",
        ),
        _key("ssl.keystore.type", "string", str, "PEM", "The keystore format (PEM)."),
        _key("ssl.keystore.location", "string", str, "", "A PEM file with the private key and certificate chain."),
        _key("ssl.keystore.password", "password", str, "", "The keystore's password (the key's, for PEM)."),
        _key("ssl.keystore.certificate.chain", "password", str, "", "The certificate chain as PEM text."),
        _key("ssl.keystore.key", "password", str, "", "The private key as PEM text."),
        _key("ssl.key.password", "password", str, "", "The private key's password."),
        _key("ssl.truststore.type", "string", str, "PEM", "The truststore format (PEM)."),
        _key("ssl.truststore.location", "string", str, "", "A PEM file of the certificates trusted to sign peers."),
        _key("ssl.truststore.password", "password", str, "", "The truststore's password (unused for PEM)."),
        _key("ssl.truststore.certificates", "password", str, "", "The trusted certificates as PEM text."),
        _key("ssl.client.auth", "string", str, "none", "Client certificates: none, requested or required."),
        _key("ssl.enabled.protocols", "list", str, "TLSv1.2,TLSv1.3", "The TLS versions accepted (TLSv1.2, TLSv1.3)."),
        _key(
            "ssl.endpoint.identification.algorithm",
            "string",
            str,
            "https",
            "https checks the peer's host name; empty does not.",
        ),
        _key(
            "ssl.principal.mapping.rules",
            "string",
            str,
            "DEFAULT",
            "Rules turning a certificate's name into a principal.",
        ),
        _key("authorizer.class.name", "string", str, "", "The authorizer; AclAuthorizer turns ACL checks on."),
        _key("super.users", "list", str, "", "Principals allowed everything, separated by semicolons."),
        _key(
            "allow.everyone.if.no.acl.found",
            "boolean",
            _bool,
            False,
            "Whether a resource without ACLs is open to everyone.",
        ),
        _key("num.network.threads", "int", None, None, "Accepted for compatibility; trio needs no network threads."),
        _key("num.io.threads", "int", None, None, "Accepted for compatibility; trio needs no request threads."),
        _key(
            "num.recovery.threads.per.data.dir",
            "int",
            None,
            None,
            "Accepted for compatibility; recovery needs no thread pool.",
        ),
        _key("num.replica.fetchers", "int", None, None, "Accepted for compatibility; followers fetch in trio tasks."),
        _key(
            "background.threads", "int", None, None, "Accepted for compatibility; background work runs in trio tasks."
        ),
    )
}


def _typed(type_name: str) -> Callable[[str], Any]:
    """Kafka's type check of a value (ConfigDef.parseType), for keys minikafka keeps but does not act on."""
    if type_name in ("int", "long", "short"):
        return lambda v: int(v.strip()) if v.strip() else None
    if type_name == "double":
        return lambda v: float(v.strip()) if v.strip() else None
    if type_name == "boolean":
        return lambda v: _bool(v) if v.strip() else None
    return lambda v: v.strip()


def _refused_unless_default(key: CompatKey) -> Callable[[str], Any]:
    typed, allowed = _typed(key.type), ALSO_ACCEPTED.get(key.name, set())

    def parse(value: str) -> Any:
        parsed = typed(value)
        if value.strip() and parsed != typed(key.default) and value.strip() not in allowed:
            raise ValueError(key.reason)
        return parsed

    return parse


def _compat_key(key: CompatKey) -> ConfigKey:
    parse = _refused_unless_default(key) if key.refused else _typed(key.type)
    return ConfigKey(key.name, key.type, parse, key.default, key.reason, key.dynamic, compat=key.reason)


#: every other key of Kafka 3.8's KafkaConfig, known with what minikafka does with it (broker/config_compat.py)
BROKER_CONFIG.update({key.name: _compat_key(key) for key in COMPAT_KEYS if key.name not in BROKER_CONFIG})
