"""Broker configuration: Kafka's `server.properties` keys, defaults and validation (Kafka 3.8
`KafkaConfig`, the subset this broker implements).

`load_config(path, overrides)` reads a Java properties file (`key=value` or `key: value`, `#`/`!`
comments, backslash line continuations), applies `--override key=value` pairs, and returns a
`BrokerConfig`. Unknown keys are logged as warnings (Kafka does the same); a missing required key
or an invalid value raises `ConfigError` naming the key.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.config import ControllerConfig
from security.config import (
    ClientSecurity,
    ListenerSecurity,
    SecurityConfigError,
    inter_broker_client,
    inter_broker_listener_name,
    listener_security,
)
from security.jaas import InvalidJaasConfig, zookeeper_client_login
from storage.cleaner.log_cleaner import CleanerConfig
from storage.config import LogConfig
from storage.topic_configs import TopicConfigs

log = logging.getLogger(__name__)


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


# key -> (parser, default). A default of None means "required"; defaults are Kafka's.
SCHEMA: dict[str, tuple[Callable[[str], Any], Any]] = {
    "broker.id": (_int_at_least(0), None),
    "listeners": (_listeners, "PLAINTEXT://:9092"),
    "advertised.listeners": (_listeners, ""),
    "control.plane.listener.name": (lambda v: v.strip().upper(), ""),
    "zookeeper.connect": (_zk_connect, None),
    "zookeeper.session.timeout.ms": (_int_at_least(1), 18000),
    "zookeeper.connection.timeout.ms": (_int_at_least(1), 18000),
    # ZooKeeper security (Kafka's docs, "ZooKeeper Authentication"): znodes created with ACLs
    # (the broker's SASL identity may write, the world may read all but the sensitive ones), and
    # the JAAS file whose `Client` section holds the DIGEST-MD5 login (Kafka reads it from the
    # JVM property of this name; minikafka from this key or the environment's KAFKA_OPTS)
    "quota.window.num": (_int_at_least(2), 11),
    "quota.window.size.seconds": (_int_at_least(1), 1),
    "zookeeper.set.acl": (_bool, False),
    "java.security.auth.login.config": (str, ""),
    "zookeeper.sasl.clientconfig": (str, "Client"),
    "log.dirs": (_list, ""),
    "log.dir": (_list, "/tmp/kafka-logs"),
    "num.partitions": (_int_at_least(1), 1),
    "default.replication.factor": (_int_at_least(1), 1),
    "min.insync.replicas": (_int_at_least(1), 1),
    "message.max.bytes": (_int_at_least(0), 1048588),
    "socket.request.max.bytes": (_int_at_least(1), 104857600),
    "connections.max.idle.ms": (_int_at_least(1), 600000),
    "max.connections": (_int_at_least(0), (1 << 31) - 1),
    "queued.max.requests": (_int_at_least(1), 500),
    "queued.max.request.bytes": (int, -1),
    "max.connections.per.ip": (_int_at_least(0), (1 << 31) - 1),
    "max.connections.per.ip.overrides": (_ip_overrides, ""),
    "replica.lag.time.max.ms": (_int_at_least(1), 30000),
    "replica.fetch.max.bytes": (_int_at_least(0), 1048576),
    "replica.fetch.wait.max.ms": (_int_at_least(0), 500),
    "replica.fetch.min.bytes": (_int_at_least(1), 1),
    "replica.fetch.response.max.bytes": (_int_at_least(0), 10485760),
    "replica.fetch.backoff.ms": (_int_at_least(0), 1000),
    "max.incremental.fetch.session.cache.slots": (_int_at_least(0), 1000),
    "replica.high.watermark.checkpoint.interval.ms": (_int_at_least(1), 5000),
    "auto.create.topics.enable": (_bool, True),
    "delete.topic.enable": (_bool, True),
    "unclean.leader.election.enable": (_bool, False),
    "controlled.shutdown.enable": (_bool, True),
    "controlled.shutdown.max.retries": (_int_at_least(0), 3),
    "controlled.shutdown.retry.backoff.ms": (_int_at_least(0), 5000),
    "auto.leader.rebalance.enable": (_bool, True),
    "leader.imbalance.check.interval.seconds": (_int_at_least(1), 300),
    "broker.rack": (str, ""),
    "replica.selector.class": (_replica_selector, ""),
    # Prometheus metrics (metrics/): -1 off, 0 any free port; served on metrics.host (all: "")
    "metrics.port": (_int_at_least(-1), -1),
    "metrics.host": (str, ""),
    "producer.id.expiration.ms": (_int_at_least(1), 86400000),
    "log.segment.bytes": (_int_at_least(14), 1073741824),
    "log.roll.ms": (int, None),
    "log.roll.hours": (_int_at_least(1), 168),
    "log.retention.ms": (int, None),
    "log.retention.minutes": (int, None),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (_int_at_least(1), 300000),
    "log.index.size.max.bytes": (_int_at_least(4), 10485760),
    "log.index.interval.bytes": (_int_at_least(0), 4096),
    "log.flush.interval.messages": (_int_at_least(1), (1 << 63) - 1),
    "log.flush.interval.ms": (int, None),
    "log.flush.scheduler.interval.ms": (_int_at_least(1), 1000),
    "log.flush.offset.checkpoint.interval.ms": (_int_at_least(1), 60000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.segment.delete.delay.ms": (_int_at_least(0), 60000),
    # the broker-wide defaults of topic configs (validated together by `log_config()`)
    "log.roll.jitter.ms": (int, None),
    "log.roll.jitter.hours": (_int_at_least(0), 0),
    "log.message.timestamp.difference.max.ms": (_int_at_least(0), None),
    "log.message.timestamp.before.max.ms": (_int_at_least(0), None),
    "log.message.timestamp.after.max.ms": (_int_at_least(0), None),
    "compression.type": (str, "producer"),
    "compression.gzip.level": (int, -1),
    "compression.lz4.level": (int, 9),
    "compression.zstd.level": (int, 3),
    # the log cleaner (Kafka's CleanerConfig); the per-log defaults are LogConfig's (log_config())
    "log.cleaner.enable": (_bool, True),
    "log.cleaner.threads": (_int_at_least(1), 1),
    "log.cleaner.dedupe.buffer.size": (_int_at_least(1), 134217728),
    "log.cleaner.io.buffer.load.factor": (_float_in(0.01, 1), 0.9),
    "log.cleaner.io.buffer.size": (_int_at_least(1), 524288),
    "log.cleaner.io.max.bytes.per.second": (_float_in(1), math.inf),
    "log.cleaner.backoff.ms": (_int_at_least(0), 15000),
    "log.cleanup.policy": (str, "delete"),
    "log.cleaner.min.cleanable.ratio": (_float_in(0, 1), 0.5),
    "log.cleaner.delete.retention.ms": (_int_at_least(0), 86400000),
    "log.cleaner.min.compaction.lag.ms": (_int_at_least(0), 0),
    "log.cleaner.max.compaction.lag.ms": (_int_at_least(1), (1 << 63) - 1),
    # the group coordinator (Kafka's GroupCoordinatorConfig / OffsetConfig)
    "offsets.topic.num.partitions": (_int_at_least(1), 50),
    "offsets.topic.replication.factor": (_int_at_least(1), 3),
    "offsets.topic.segment.bytes": (_int_at_least(1), 104857600),
    "offsets.topic.compression.codec": (_int_at_least(0), 0),
    "offsets.load.buffer.size": (_int_at_least(1), 5242880),
    "offsets.commit.timeout.ms": (_int_at_least(1), 5000),
    "offsets.retention.minutes": (_int_at_least(1), 10080),
    "offsets.retention.check.interval.ms": (_int_at_least(1), 600000),
    "offset.metadata.max.bytes": (_int_at_least(0), 4096),
    "group.initial.rebalance.delay.ms": (_int_at_least(0), 3000),
    "group.min.session.timeout.ms": (_int_at_least(0), 6000),
    "group.max.session.timeout.ms": (_int_at_least(0), 1800000),
    "group.max.size": (_int_at_least(1), (1 << 31) - 1),
    # the transaction coordinator (Kafka's TransactionStateManagerConfig / TransactionLogConfig)
    "transaction.state.log.num.partitions": (_int_at_least(1), 50),
    "transaction.state.log.replication.factor": (_int_at_least(1), 3),
    "transaction.state.log.min.isr": (_int_at_least(1), 2),
    "transaction.state.log.segment.bytes": (_int_at_least(1), 104857600),
    "transaction.state.log.load.buffer.size": (_int_at_least(1), 5242880),
    "transaction.max.timeout.ms": (_int_at_least(1), 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_int_at_least(1), 10000),
    "transactional.id.expiration.ms": (_int_at_least(1), 604800000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_int_at_least(1), 3600000),
    # security (security/config.py reads them, per listener where Kafka allows
    # `listener.name.<listener>.<key>`)
    "listener.security.protocol.map": (str, ""),
    "inter.broker.listener.name": (str, ""),
    "security.inter.broker.protocol": (str, ""),
    "sasl.enabled.mechanisms": (str, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI"),
    "sasl.jaas.config": (str, ""),
    "ssl.keystore.type": (str, "PEM"),
    "ssl.keystore.location": (str, ""),
    "ssl.keystore.password": (str, ""),
    "ssl.keystore.certificate.chain": (str, ""),
    "ssl.keystore.key": (str, ""),
    "ssl.key.password": (str, ""),
    "ssl.truststore.type": (str, "PEM"),
    "ssl.truststore.location": (str, ""),
    "ssl.truststore.password": (str, ""),
    "ssl.truststore.certificates": (str, ""),
    "ssl.client.auth": (str, "none"),
    "ssl.enabled.protocols": (str, "TLSv1.2,TLSv1.3"),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
}

#: `authorizer.class.name` values that turn authorization on (Kafka's ZooKeeper-mode authorizers)
ACL_AUTHORIZERS = {"kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer"}

#: per-listener keys (`listener.name.<listener>.<key>`) are read by security/config.py
LISTENER_PREFIX = "listener.name."

#: Kafka keys that size thread pools: trio needs none, so they are accepted and have no effect
NO_EFFECT_KEYS = {
    "num.network.threads",
    "num.io.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "background.threads",
}


@dataclass(frozen=True)
class BrokerConfig:
    """Parsed, validated broker configuration. `values` holds every known key (defaults filled);
    `raw` the properties as given."""

    values: dict[str, Any]
    raw: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def listeners(self) -> list[Listener]:
        return self.values["listeners"]

    @property
    def advertised_listeners(self) -> list[Listener]:
        return self.values["advertised.listeners"] or self.listeners

    def zookeeper_login(self, environ: dict[str, str] | None = None) -> tuple[str, str] | None:
        """(username, password) for ZooKeeper SASL DIGEST-MD5: the DigestLoginModule of the
        `zookeeper.sasl.clientconfig` section (default `Client`) of the JAAS file named by
        `java.security.auth.login.config`, else by KAFKA_OPTS' -Djava.security.auth.login.config
        (Kafka's way); None without one. Raises ConfigError for an unreadable file."""
        import os

        path = self.values["java.security.auth.login.config"] or jaas_file_from_kafka_opts(
            (os.environ if environ is None else environ).get("KAFKA_OPTS", "")
        )
        if not path:
            return None
        try:
            text = Path(path).read_text()
            return zookeeper_client_login(text, self.values["zookeeper.sasl.clientconfig"])
        except (OSError, InvalidJaasConfig) as e:
            raise ConfigError(f"java.security.auth.login.config {path}: {e}") from None

    @property
    def control_plane_listener_name(self) -> str | None:
        """`control.plane.listener.name`: the listener reserved for the controller's requests
        (LeaderAndIsr, StopReplica, UpdateMetadata are refused on the others), or None."""
        return self.values["control.plane.listener.name"] or None

    @property
    def inter_broker_listener(self) -> Listener:
        """The listener brokers use to reach each other (`inter.broker.listener.name`, else the
        one named after `security.inter.broker.protocol`, else the first that is not the control
        plane's)."""
        names = [lst.name for lst in self.listeners]
        name = inter_broker_listener_name(self.raw, names, self.control_plane_listener_name)
        return next(lst for lst in self.listeners if lst.name == name)

    def listener_security(self) -> dict[str, ListenerSecurity]:
        """Each listener's protocol, TLS settings and SASL mechanisms (security/config.py)."""
        return listener_security(self.raw, [lst.name for lst in self.listeners])

    def inter_broker_security(self) -> ClientSecurity:
        """How this broker connects to the others' inter-broker listener."""
        return inter_broker_client(self.raw, self.listener_security()[self.inter_broker_listener.name])

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(d) for d in (self.values["log.dirs"] or self.values["log.dir"])]

    def log_config(self) -> LogConfig:
        """Default per-log configuration from the `log.*` keys (`LogConfig.from_broker_config`)."""
        try:
            return LogConfig.from_broker_config({k: str(v) for k, v in self.raw.items()})
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def controller_config(self) -> ControllerConfig:
        """The settings the controller component reads."""
        return ControllerConfig(
            self.broker_id,
            auto_leader_rebalance_enable=self["auto.leader.rebalance.enable"],
            leader_imbalance_check_interval_seconds=self["leader.imbalance.check.interval.seconds"],
            control_plane_listener_name=self.control_plane_listener_name,
            inter_broker_listener_name=self.inter_broker_listener.name,
            client_security=inter_broker_client(
                self.raw, self.listener_security()[self.control_plane_listener_name or self.inter_broker_listener.name]
            ),
        )

    def cleaner_config(self) -> CleanerConfig:
        """The log cleaner's settings (`log.cleaner.*`)."""
        return CleanerConfig(
            enable=self["log.cleaner.enable"],
            threads=self["log.cleaner.threads"],
            dedupe_buffer_size=self["log.cleaner.dedupe.buffer.size"],
            io_buffer_load_factor=self["log.cleaner.io.buffer.load.factor"],
            io_max_bytes_per_second=self["log.cleaner.io.max.bytes.per.second"],
            io_buffer_size=self["log.cleaner.io.buffer.size"],
            backoff_ms=self["log.cleaner.backoff.ms"],
        )

    def topic_configs(self) -> TopicConfigs:
        """An empty `TopicConfigs` with this broker's defaults (log.*, min.insync.replicas,
        unclean.leader.election.enable) under the topics' overrides."""
        return TopicConfigs(
            self.log_config(),
            min_insync_replicas=self["min.insync.replicas"],
            unclean_leader_election_enable=self["unclean.leader.election.enable"],
        )


def parse_properties(text: str) -> dict[str, str]:
    """Java properties: `key=value` / `key: value` / `key value`, `#`/`!` comments, trailing `\\`
    continues a line. Later keys win."""
    out: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        stripped, pending = pending + stripped, ""
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", stripped)
        if not m:
            out[stripped] = ""
            continue
        out[m.group(1)] = m.group(2)
    return out


def build_config(props: dict[str, str]) -> BrokerConfig:
    """Validate `props` against SCHEMA; unknown keys are warned about, not fatal."""
    for key in props:
        if key in NO_EFFECT_KEYS:
            log.info("configuration key %r has no effect in minikafka (trio needs no thread pools)", key)
        elif key not in SCHEMA and not key.startswith(LISTENER_PREFIX):
            log.warning("unknown configuration key %r is ignored", key)
    values: dict[str, Any] = {}
    for key, (parse, default) in SCHEMA.items():
        if key in props:
            try:
                values[key] = parse(props[key])
            except ValueError as e:
                raise ConfigError(f"invalid value {props[key]!r} for {key}: {e}") from None
        elif default is None and key in ("broker.id", "zookeeper.connect"):
            raise ConfigError(f"{key} is required")
        else:
            values[key] = parse(default) if isinstance(default, str) and default and parse is not str else default
    control_plane = values["control.plane.listener.name"]
    if control_plane:
        names = [lst.name for lst in values["listeners"]]
        if control_plane not in names:
            raise ConfigError(f"control.plane.listener.name {control_plane} is not one of the listeners {names}")
        if len(names) < 2:
            raise ConfigError("control.plane.listener.name needs another listener for clients and replication")
    if values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
        raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
    authorizer = values["authorizer.class.name"].strip()
    if authorizer and authorizer not in ACL_AUTHORIZERS:
        raise ConfigError(
            f"authorizer.class.name {authorizer} is not supported (use kafka.security.authorizer.AclAuthorizer)"
        )
    values["authorizer.class.name"] = authorizer
    config = BrokerConfig(values, dict(props))
    config.log_config()  # validates the log.* keys together
    try:  # validates the listeners' security settings together
        config.inter_broker_security()
    except SecurityConfigError as e:
        raise ConfigError(str(e)) from None
    login = config.zookeeper_login()  # reads and checks the JAAS file
    if values["zookeeper.set.acl"] and login is None:
        raise ConfigError(
            "zookeeper.set.acl is true, but ZooKeeper client SASL is not configured "
            "(java.security.auth.login.config naming a JAAS file with a Client section)"
        )
    return config


def jaas_file_from_kafka_opts(kafka_opts: str) -> str:
    """The `-Djava.security.auth.login.config=<file>` of a KAFKA_OPTS value ("" if absent)."""
    m = re.search(r"-Djava\.security\.auth\.login\.config=(\S+)", kafka_opts)
    return m.group(1) if m else ""


def env_properties(environ: dict[str, str], prefix: str = "KAFKA_") -> dict[str, str]:
    """Configuration from environment variables, as Kafka's container images map them:
    `KAFKA_ZOOKEEPER_CONNECT` -> `zookeeper.connect` (prefix dropped, lower case, `_` -> `.`)."""
    return {
        name[len(prefix) :].lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(prefix) and len(name) > len(prefix)
    }


def load_config(
    path: Path | None, overrides: Sequence[str] = (), environ: dict[str, str] | None = None
) -> BrokerConfig:
    """Read `path` (optional), then `KAFKA_*` variables from `environ` (when given), then apply
    `key=value` overrides; raises ConfigError."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            props.update(parse_properties(Path(path).read_text()))
        except OSError as e:
            raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    if environ is not None:
        props.update(env_properties(environ))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value")
        props[key.strip()] = value.strip()
    return build_config(props)
