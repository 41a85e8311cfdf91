"""The topic configuration one broker process knows: each topic's overrides as stored in
ZooKeeper (`/config/topics/<topic>`) over the broker's defaults.

One `TopicConfigs` is shared by the log manager (segment, retention and flush settings of each
log), the replica manager (`min.insync.replicas` for acks=all) and the controller
(`unclean.leader.election.enable`). Overrides are validated when set (`storage.config`); an
override that this broker cannot use (written by another tool, or by an older version) is logged
and dropped so the topic runs with the default instead of failing its partitions.
"""

from __future__ import annotations

import logging
from typing import Any

from protocol.topic_names import INTERNAL_TOPICS
from storage.config import TOPIC_CONFIGS, LogConfig, parse_topic_config

log = logging.getLogger(__name__)

_NONE: dict[str, Any] = {}


class TopicConfigs:
    def __init__(
        self,
        defaults: LogConfig | None = None,
        *,
        min_insync_replicas: int = 1,
        unclean_leader_election_enable: bool = False,
    ):
        """`defaults`: the broker's log defaults (`LogConfig.from_broker_config`); the two keywords
        are the broker's `min.insync.replicas` and `unclean.leader.election.enable`."""
        self.defaults = defaults or LogConfig()
        self.default_min_insync_replicas = min_insync_replicas
        self.default_unclean_leader_election_enable = unclean_leader_election_enable
        self._overrides: dict[str, dict[str, str]] = {}
        self._parsed: dict[str, dict[str, Any]] = {}  # the overrides' typed values, parsed once
        self._log_configs: dict[str, LogConfig] = {}

    def set_defaults(
        self, defaults: LogConfig, *, min_insync_replicas: int, unclean_leader_election_enable: bool
    ) -> None:
        """Install new broker defaults (a dynamic broker config changed); every topic's log config
        is recomputed on its next use."""
        self.defaults = defaults
        self.default_min_insync_replicas = min_insync_replicas
        self.default_unclean_leader_election_enable = unclean_leader_election_enable
        self._log_configs.clear()

    def __contains__(self, topic: str) -> bool:
        return topic in self._overrides

    def set(self, topic: str, overrides: dict[str, str]) -> None:
        """Record a topic's overrides (as read from `/config/topics/<topic>`)."""
        usable = {key: value for key, value in overrides.items() if self._usable(topic, key, value)}
        try:
            parse_topic_config(
                usable, internal=topic in INTERNAL_TOPICS
            )  # the one check that spans keys: compaction lag min <= max
        except ValueError as e:
            log.warning("topic %s: ignoring its compaction lag configs: %s", topic, e)
            usable = {k: v for k, v in usable.items() if k not in ("min.compaction.lag.ms", "max.compaction.lag.ms")}
        self._overrides[topic] = usable
        self._parsed[topic] = {key: TOPIC_CONFIGS[key].parse(key, value) for key, value in usable.items()}
        self._log_configs.pop(topic, None)

    @staticmethod
    def _usable(topic: str, key: str, value: str) -> bool:
        try:
            parse_topic_config({key: value}, internal=topic in INTERNAL_TOPICS)
            return True
        except ValueError as e:
            log.warning("topic %s: ignoring its config %s=%r: %s", topic, key, value, e)
            return False

    def remove(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        self._parsed.pop(topic, None)
        self._log_configs.pop(topic, None)

    def overrides(self, topic: str) -> dict[str, str]:
        """The topic's own overrides (empty when it has none or is unknown)."""
        return dict(self._overrides.get(topic, {}))

    def log_config(self, topic: str) -> LogConfig:
        """The configuration the topic's partition logs run with."""
        config = self._log_configs.get(topic)
        if config is None:
            config = LogConfig.from_topic_config(
                self._overrides.get(topic, {}), base=self.defaults, internal=topic in INTERNAL_TOPICS
            )
            self._log_configs[topic] = config
        return config

    def min_insync_replicas(self, topic: str) -> int:
        """`min.insync.replicas`: the topic's override, else the broker's."""
        return self._override(topic, "min.insync.replicas", self.default_min_insync_replicas)

    def unclean_leader_election_enable(self, topic: str) -> bool:
        """`unclean.leader.election.enable`: the topic's override, else the broker's."""
        return self._override(topic, "unclean.leader.election.enable", self.default_unclean_leader_election_enable)

    def _override(self, topic: str, key: str, default: Any) -> Any:
        value = self._parsed.get(topic, _NONE).get(key)  # per produce request: no parsing here
        return default if value is None else value
