"""Broker configuration: Kafka's `server.properties` keys, defaults and validation (Kafka 3.8
`KafkaConfig`, the subset this broker implements).

`load_config(path, overrides)` reads a Java properties file (`key=value` or `key: value`, `#`/`!`
comments, backslash line continuations), applies `--override key=value` pairs, and returns a
`BrokerConfig`. Unknown keys are logged as warnings (Kafka does the same); a missing required key
or an invalid value raises `ConfigError` naming the key. The keys, their parsers and defaults are
the one table `broker.config_def.BROKER_CONFIG`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from broker.config_def import (
    BROKER_CONFIG,
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ConfigError,
    Listener,
)
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

__all__ = ["LEADER_SELECTOR", "RACK_AWARE_SELECTOR", "BrokerConfig", "ConfigError", "Listener", "load_config"]

#: `authorizer.class.name` values that turn authorization on (Kafka's ZooKeeper-mode authorizers)
ACL_AUTHORIZERS = {"kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer"}

#: per-listener keys (`listener.name.<listener>.<key>`) are read by security/config.py
LISTENER_PREFIX = "listener.name."

#: Kafka keys that size thread pools: trio needs none, so they are accepted and have no effect
NO_EFFECT_KEYS = frozenset(key.name for key in BROKER_CONFIG.values() if not key.has_effect)


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
        return derive(CleanerConfig, self)

    def topic_configs(self) -> TopicConfigs:
        """An empty `TopicConfigs` with this broker's defaults (log.*, min.insync.replicas,
        unclean.leader.election.enable) under the topics' overrides."""
        return TopicConfigs(
            self.log_config(),
            min_insync_replicas=self["min.insync.replicas"],
            unclean_leader_election_enable=self["unclean.leader.election.enable"],
        )


ComponentConfig = TypeVar("ComponentConfig")


def derive(cls: type[ComponentConfig], config: BrokerConfig, **overrides: Any) -> ComponentConfig:
    """A component's config dataclass (the coordinators', the log cleaner's) from the broker's
    config: every field whose metadata names a `key` takes that key's value (times its `scale`,
    e.g. minutes to ms), `overrides` win, and fields without a key keep their own default."""
    values = dict(overrides)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = f.metadata.get("key")
        if key is not None and f.name not in values:
            value = config[key]
            values[f.name] = value * f.metadata["scale"] if "scale" in f.metadata else value
    return cls(**values)


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
    """Validate `props` against `BROKER_CONFIG`; unknown keys are warned about, not fatal."""
    for key in props:
        if key in NO_EFFECT_KEYS:
            log.info("configuration key %r has no effect in minikafka (trio needs no thread pools)", key)
        elif key in BROKER_CONFIG and BROKER_CONFIG[key].compat:
            log.info("configuration key %r: %s", key, BROKER_CONFIG[key].compat)
        elif key not in BROKER_CONFIG and not key.startswith(LISTENER_PREFIX):
            log.warning("unknown configuration key %r is ignored", key)
    values: dict[str, Any] = {}
    for key, definition in BROKER_CONFIG.items():
        parse, default = definition.parse, definition.default
        if parse is None:
            continue
        if key in props:
            try:
                values[key] = parse(props[key])
            except ValueError as e:
                raise ConfigError(f"invalid value {props[key]!r} for {key}: {e}") from None
        elif default is None and key in ("broker.id", "zookeeper.connect"):
            raise ConfigError(f"{key} is required")
        else:
            values[key] = parse(default) if isinstance(default, str) and default and parse is not str else default
    if values["node.id"] not in (None, -1, values["broker.id"]):
        raise ConfigError(
            f"node.id {values['node.id']} must be -1 or broker.id ({values['broker.id']}): {BROKER_CONFIG['node.id'].compat}"
        )
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
    _check_consumer_group_keys(values)
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


def _check_consumer_group_keys(values: dict[str, Any]) -> None:
    """Kafka's GroupCoordinatorConfig checks of the consumer and share group protocols' timeouts
    (ms): each default within its min and max, the heartbeat shorter than the session."""
    for protocol, whats in (
        ("consumer", ("heartbeat.interval", "session.timeout")),
        ("share", ("heartbeat.interval", "session.timeout", "record.lock.duration")),
    ):
        for what in whats:
            low, high = values[f"group.{protocol}.min.{what}.ms"], values[f"group.{protocol}.max.{what}.ms"]
            value = values[f"group.{protocol}.{what}.ms"]
            if low > high:
                raise ConfigError(
                    f"group.{protocol}.min.{what}.ms {low} must not exceed group.{protocol}.max.{what}.ms {high}"
                )
            if not low <= value <= high:
                raise ConfigError(f"group.{protocol}.{what}.ms {value} must be within [{low}, {high}]")
        if values[f"group.{protocol}.heartbeat.interval.ms"] >= values[f"group.{protocol}.session.timeout.ms"]:
            raise ConfigError(
                f"group.{protocol}.heartbeat.interval.ms must be less than group.{protocol}.session.timeout.ms"
            )


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
