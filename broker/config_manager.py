"""Applies config changes live on one broker (Kafka's `DynamicConfigManager` and its
`ZkNodeChangeNotificationListener`, ZooKeeper mode).

At startup the dynamic broker layers (`/config/brokers/<default>`, `/config/brokers/<id>`) are read
before any log is loaded. Then every sequential `/config/changes/config_change_<seq>` above the last
one processed (all of them after a start; they are idempotent) names an entity whose config is read
again and applied: a topic's overrides go to `TopicConfigs` and to its logs on this broker
(`LogManager.reconfigure`), a broker layer recomputes the defaults every log and the replica manager
use (`min.insync.replicas` is read per acks=all produce, so it applies to the next one), a user's
node (`/config/users/<user>`) refreshes its SCRAM credentials in the `CredentialCache` (all users
are read at startup), and user and client-id nodes their quotas (`broker.quota`). Changes
older than 15 minutes are deleted after processing, as Kafka does. The ZooKeeper watch only wakes
the task; the reads and applies happen in it, in sequence order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import trio

from broker.config import BrokerConfig, ConfigError
from broker.dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from broker.quota import entities as quota_entities
from broker.quota.manager import QUOTA_KEYS, QuotaManagers
from client_metrics import config as client_metrics_config
from client_metrics.manager import ClientMetricsManager
from coordinator.group.group_config import GroupConfigError, GroupConfigs
from security.credentials import CredentialCache, user_from_node_name
from storage.log_manager import LogManager
from storage.topic_configs import TopicConfigs
from zk import admin, znodes
from zk.client import NoNodeError, ZkClient

log = logging.getLogger(__name__)

#: notifications older than this are removed (Kafka's changeExpirationMs, 15 minutes)
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


class DynamicConfigManager:
    def __init__(
        self,
        zk: ZkClient,
        dynamic: DynamicBrokerConfig,
        topic_configs: TopicConfigs,
        log_manager: LogManager,
        credentials: CredentialCache | None = None,
        quotas: QuotaManagers | None = None,
        group_configs: GroupConfigs | None = None,
        client_metrics: ClientMetricsManager | None = None,
    ):
        self.zk = zk
        self.group_configs = group_configs
        self.client_metrics = client_metrics
        self.credentials = credentials if credentials is not None else CredentialCache()
        self.quotas = quotas if quotas is not None else QuotaManagers.create()
        self.dynamic = dynamic
        self.topic_configs = topic_configs
        self.log_manager = log_manager
        self.last_seq = -1
        self.applied = 0  # notifications processed (tests wait on it)
        #: called with each newly applied broker config (dynamic keys read elsewhere, such as
        #: transaction.partition.verification.enable)
        self.on_broker_config: list[Callable[[BrokerConfig], None]] = []
        self._wake_send, self._wake_receive = trio.open_memory_channel[None](1)

    # ---- applying --------------------------------------------------------------------------------
    def apply_broker_config(self, config: BrokerConfig) -> None:
        """Make `config`'s defaults the ones every log and the replica manager use."""
        defaults = config.log_config()
        self.topic_configs.set_defaults(
            defaults,
            min_insync_replicas=config["min.insync.replicas"],
            unclean_leader_election_enable=config["unclean.leader.election.enable"],
        )
        self.log_manager.config = defaults
        self.log_manager.reconfigure()
        for listener in self.on_broker_config:
            listener(config)

    async def load_broker_configs(self) -> None:
        """Read both dynamic broker layers and apply them (startup, and on a broker change)."""
        per_broker = await admin.fetch_entity_config(self.zk, "brokers", str(self.dynamic.broker_id))
        default = await admin.fetch_entity_config(self.zk, "brokers", DEFAULT_ENTITY)
        try:
            config = self.dynamic.update(per_broker=per_broker, cluster_default=default)
        except ConfigError as e:
            log.warning("dynamic broker configs not applied: %s", e)
            return
        self.apply_broker_config(config)
        if per_broker or default:
            log.info("dynamic broker configs in force: per-broker %s, cluster default %s", per_broker, default)

    async def apply_topic(self, topic: str) -> None:
        """Apply a topic's stored overrides; a topic that no longer exists is forgotten."""
        if await self.zk.exists(znodes.topic_path(topic)) is None:
            self.topic_configs.remove(topic)
            return
        overrides = await admin.fetch_entity_config(self.zk, "topics", topic)
        self.topic_configs.set(topic, overrides)
        updated = self.log_manager.reconfigure({topic})
        log.info("topic %s config changed to %s (%d local logs updated)", topic, overrides, updated)

    async def load_user_or_client(self, entity_type: str, name: str) -> None:
        """Apply one user, user-and-client or client config znode (`users/<u>`,
        `users/<u>/clients/<c>`, `clients/<c>`; names url-encoded, as Kafka stores them), read
        once: a user's SCRAM credentials, and any entity's quotas."""
        config = await admin.fetch_entity_config(self.zk, entity_type, name)
        if entity_type == "users" and "/clients/" not in name:
            self.credentials.update_user(user_from_node_name(name), config)
        entity = quota_entities.from_change(entity_type, name)
        if entity is not None:
            self.quotas.apply_entity_config(entity, config)
            quotas = {k: v for k, v in config.items() if k in QUOTA_KEYS}
            if quotas:
                log.info("quotas of %s/%s: %s", entity_type, name, quotas)

    async def load_group(self, group_id: str) -> None:
        """Apply one group's stored configs (KIP-932's share group keys)."""
        if self.group_configs is None:
            return
        stored = await admin.fetch_entity_config(self.zk, "groups", group_id)
        try:
            self.group_configs.set(group_id, stored)
        except GroupConfigError as e:
            log.warning("configs of group %s not applied: %s", group_id, e)
            return
        log.info("group %s configs: %s", group_id, stored)

    async def load_client_metrics(self, name: str) -> None:
        """Apply one CLIENT_METRICS subscription (KIP-714); a deleted or empty one is dropped."""
        if self.client_metrics is None:
            return
        stored = await admin.fetch_entity_config(self.zk, "client-metrics", name)
        if not stored:
            self.client_metrics.set_subscription(name, None)
            log.info("client metrics subscription %s removed", name)
            return
        try:
            self.client_metrics.set_subscription(name, client_metrics_config.parse(name, stored))
        except ValueError as e:
            log.warning("client metrics subscription %s not applied: %s", name, e)
            return
        log.info("client metrics subscription %s: %s", name, stored)

    async def load_all_client_metrics(self) -> None:
        """Read every CLIENT_METRICS subscription (startup)."""
        for name in await self.zk.get_children(znodes.CONFIG_CLIENT_METRICS):
            await self.load_client_metrics(name)

    async def load_groups(self) -> None:
        """Read every group's configs (startup)."""
        for group_id in await self.zk.get_children(znodes.CONFIG_GROUPS):
            await self.load_group(group_id)

    async def load_users_and_clients(self) -> None:
        """Read every user's credentials and every user's and client's quotas (startup)."""
        for entity_type, name in await admin.user_and_client_nodes(self.zk):
            await self.load_user_or_client(entity_type, name)

    async def process(self, entity_type: str, name: str) -> None:
        """Apply the current config of one entity named by a change notification."""
        if entity_type == "topics":
            await self.apply_topic(name)
        elif entity_type == "brokers" and name in (DEFAULT_ENTITY, str(self.dynamic.broker_id)):
            await self.load_broker_configs()
        elif entity_type in ("users", "clients"):
            await self.load_user_or_client(entity_type, name)
        elif entity_type == "groups":
            await self.load_group(name)
        elif entity_type == "client-metrics":
            await self.load_client_metrics(name)
        # other brokers' entities, ips: nothing this broker applies

    # ---- the notification listener -----------------------------------------------------------
    async def process_notifications(self) -> None:
        """Handle every change notification newer than the last processed, in order."""
        children = await self.zk.get_children(znodes.CONFIG_CHANGES)
        prefix = znodes.CONFIG_CHANGE_PREFIX
        numbered = sorted((int(c[len(prefix) :]), c) for c in children if c.startswith(prefix))
        now_ms = time.time() * 1000
        for seq, child in numbered:
            path = f"{znodes.CONFIG_CHANGES}/{child}"
            found = await self.zk.get_or_none(path)
            if found is None:
                continue
            if seq > self.last_seq:
                try:
                    entity_type, name = znodes.decode_config_change(found[0])
                except (ValueError, KeyError) as e:
                    log.warning("ignoring config change %s: %s", child, e)
                else:
                    await self.process(entity_type, name)
                self.last_seq = seq
                self.applied += 1
            if found[1].ctime_ms and now_ms - found[1].ctime_ms > CHANGE_EXPIRATION_MS:
                try:
                    await self.zk.delete(path)
                except NoNodeError:
                    pass  # another broker purged it

    def wake(self) -> None:
        """Re-read the change notifications (after a new ZooKeeper session: changes made while
        the session was gone are processed then)."""
        self._wake([])

    def _wake(self, children: list[str]) -> None:
        try:
            self._wake_send.send_nowait(None)
        except trio.WouldBlock:
            pass  # a wake-up is already pending

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        watch = await self.zk.watch_children(znodes.CONFIG_CHANGES, self._wake)
        try:
            task_status.started()
            async for _ in self._wake_receive:
                try:
                    await self.process_notifications()
                except Exception:
                    log.exception("processing config change notifications failed; retrying on the next change")
        finally:
            watch.stop()
