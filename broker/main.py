"""The broker process: `minikafka broker --config server.properties [--override key=value ...]`.

Startup: validate the config (exit 2 on a ConfigError), connect to ZooKeeper (exit 1 if it does not
answer within zookeeper.connection.timeout.ms), create Kafka's persistent paths and /cluster/id,
load the logs (recovering after an unclean shutdown), bind the listeners, then register the
ephemeral /brokers/ids/<id> (exit 1 if another broker holds the id). The line
`minikafka broker <id> started, listening on NAME://host:port` on stdout marks readiness.

SIGTERM or SIGINT: stop accepting, finish in-flight requests, checkpoint high watermarks, flush and
checkpoint the logs, write the clean-shutdown marker, deregister, exit 0.
"""

from __future__ import annotations

import argparse
import base64
import gc
import logging
import logging.handlers
import os
import resource
import signal
import sys
import time
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from broker import admin_manager
from broker.acl_store import ZkAclStore
from broker.config import BrokerConfig, ConfigError, derive, load_config
from broker.config_manager import DynamicConfigManager
from broker.context import BrokerContext
from broker.coordinator_log import CoordinatorPartitionLog
from broker.dynamic_config import DynamicBrokerConfig
from broker.handlers import INLINE_HANDLERS, advertised_api_versions, served_handlers
from broker.internal_topics import internal_topic_spec
from broker.listener_transport import build_transports
from broker.metadata_cache import MetadataCache
from broker.partition_metadata_client import PartitionMetadataClient
from broker.producer_ids import ProducerIdManager
from broker.quota.manager import QuotaManagers
from broker.quota.request_time import RequestQuota
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer, ListenerBindError, SocketServerConfig
from broker.share.persister import SharePersister
from broker.share.share_manager import ShareConfig, SharePartitionManager
from broker.txn_marker_channel import TransactionMarkerChannel
from broker.txn_verification import AddPartitionsToTxnManager
from broker.zk_session import SessionKeeper
from client.connection import Connection, ConnectionClosed
from client_metrics.manager import ClientMetricsManager
from console.auth import console_auth
from console.server import Console
from console.snapshot import local_snapshot, read_records
from controller import events as controller_events
from controller.controller import KafkaController
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.coordinator import GroupCoordinator
from coordinator.group.group_config import GroupConfigs
from coordinator.share.config import ShareCoordinatorConfig
from coordinator.share.coordinator import ShareCoordinator
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.coordinator import TransactionCoordinator
from metrics.client_metrics import ClientMetricsCollector
from metrics.collector import BrokerCollector
from metrics.http import serve_metrics
from protocol.api_keys import ApiKey
from protocol.topic_names import SHARE_GROUP_STATE_TOPIC
from security.authorizer import AclCache, Authorizer, parse_super_users
from security.config import SecurityConfigError
from security.credentials import CredentialCache
from security.ssl_context import client_context, server_context
from storage.cleaner.log_cleaner import LogCleaner
from storage.errors import StorageError
from storage.log_manager import LogManager
from zk import znodes
from zk.client import SESSION_ERRORS, NodeExistsError, ZkClient, ZkUnavailable

log = logging.getLogger("minikafka.broker")


class BrokerStartupError(Exception):
    """A fatal startup condition, with the message to print."""


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.zk = ZkClient(
            config["zookeeper.connect"],
            session_timeout_ms=config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
            sasl_login=config.zookeeper_login(),
            set_acl=config["zookeeper.set.acl"],
        )
        self.topic_configs = config.topic_configs()
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config(),
            topic_config=self.topic_configs.log_config,
            flush_check_interval_ms=config["log.flush.scheduler.interval.ms"],
            checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
        )
        self.metadata_cache = MetadataCache(listener=config.inter_broker_listener.name)
        self.credentials = CredentialCache()
        self.transports = build_transports(config.listener_security(), self.credentials)
        self.client_security = config.inter_broker_security()
        self.acl_store: ZkAclStore | None = None
        self.authorizer: Authorizer | None = None
        if config["authorizer.class.name"]:
            cache = AclCache()
            self.acl_store = ZkAclStore(self.zk, cache)
            self.authorizer = Authorizer(
                cache, parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"]
            )
        self.replica_manager = ReplicaManager(
            config, self.log_manager, self.metadata_cache, self.topic_configs, self.zk
        )
        self.replica_manager.client_security = self.client_security
        self.log_cleaner = LogCleaner(self.log_manager, config.cleaner_config(), self.replica_manager.high_watermark_of)
        # every broker names the controller /controller names, as soon as it changes (the active
        # controller's UpdateMetadata may be late, or never come from one that lost its session)
        self.controller = KafkaController(
            config.controller_config(),
            self.zk,
            self.topic_configs,
            on_controller_known=lambda controller_id: setattr(self.metadata_cache, "controller_id", controller_id),
        )
        self.dynamic_config = DynamicBrokerConfig(config.raw, config.broker_id)
        self.quotas = QuotaManagers.create(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)
        self.group_configs = GroupConfigs(self.config)
        self.client_metrics = ClientMetricsManager(
            lambda: time.monotonic() * 1000,
            max_bytes=self.config["telemetry.max.bytes"],
            max_instances=self.config["telemetry.max.client.instances"],
            max_series=self.config["telemetry.max.series"],
        )
        self.config_manager = DynamicConfigManager(
            self.zk,
            self.dynamic_config,
            self.topic_configs,
            self.log_manager,
            self.credentials,
            self.quotas,
            self.group_configs,
            self.client_metrics,
        )
        self.server: KafkaServer | None = None
        self.registration: znodes.BrokerRegistration | None = None
        self.console_url: str | None = None  # set when the metrics port (and console) is served
        self.session = self._session_keeper()

    async def _read_zookeeper(self) -> str:
        """The ZooKeeper work before anything is served: the persistent paths, the cluster id and
        the dynamic configs (broker, users and clients, groups); -> the cluster id. Every step
        is idempotent, so a connection lost meanwhile (a session error: the ZooKeeper client
        reconnects by itself) repeats them, for up to zookeeper.connection.timeout.ms; then
        BrokerStartupError."""
        deadline = trio.current_time() + self.config["zookeeper.connection.timeout.ms"] / 1000
        while True:
            try:
                for path in znodes.PERSISTENT_PATHS:
                    await self.zk.ensure_path(path)
                cluster_id = await self._cluster_id()
                await self.config_manager.load_broker_configs()
                await self.config_manager.load_users_and_clients()
                await self.config_manager.load_groups()
                await self.config_manager.load_all_client_metrics()
                return cluster_id
            except SESSION_ERRORS as e:
                if trio.current_time() >= deadline:
                    raise BrokerStartupError(f"ZooKeeper at {self.zk.connect} kept failing at startup: {e!r}") from None
                log.warning("ZooKeeper failed during startup (%r); trying again", e)
                await trio.sleep(0.5)

    async def _expire_client_metrics(self) -> None:
        """Forget silent client instances (KIP-714) once a second, scraped or not."""
        while True:
            await trio.sleep(1)
            self.client_metrics.expire()

    async def _cluster_id(self) -> str:
        found = await self.zk.get_or_none(znodes.CLUSTER_ID)
        if found is None:
            try:
                await self.zk.create(
                    znodes.CLUSTER_ID, znodes.encode_cluster_id(znodes.new_cluster_id()), makepath=True
                )
            except NodeExistsError:
                pass
            found = await self.zk.get(znodes.CLUSTER_ID)
        return znodes.decode_cluster_id(found[0])

    async def _register(self, bound) -> znodes.BrokerRegistration:
        advertised = self.config.advertised_listeners
        ports = {listener.name: port for listener, port in bound}
        endpoints = [(a.name, a.host or "127.0.0.1", a.port or ports.get(a.name, 0)) for a in advertised]
        protocols = {name: s.protocol.name for name, s in self.config.listener_security().items()}
        registration = self.registration = znodes.BrokerRegistration(
            self.config.broker_id, endpoints, self.config["broker.rack"] or None, protocols, self.console_url
        )
        # A registration left by a killed process of this broker vanishes when its session expires:
        # wait that long; a live broker with the same id keeps it, and we refuse to start.
        czxid = None
        with trio.move_on_after(self.config["zookeeper.session.timeout.ms"] / 1000 + 2):
            while (czxid := await self.session.register_once()) is None:
                log.info("%s exists; waiting for an expired session's registration to go", self.session.path)
                await trio.sleep(0.25)
        if czxid is None:
            raise BrokerStartupError(
                f"broker.id {self.config.broker_id} is already registered in ZooKeeper ({self.session.path})"
            )
        self.replica_manager.broker_epoch = czxid
        return registration

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run until SIGTERM/SIGINT (or cancellation), then shut down cleanly."""
        try:
            await self.zk.start()
        except ZkUnavailable as e:
            raise BrokerStartupError(str(e)) from None
        try:
            cluster_id = await self._read_zookeeper()
            try:
                await trio.to_thread.run_sync(self.log_manager.startup)
            except StorageError as e:
                raise BrokerStartupError(str(e)) from None
            coordinator_log = CoordinatorPartitionLog(self.replica_manager)
            group_coordinator = GroupCoordinator(
                coordinator_log,
                self.metadata_cache,
                derive(GroupCoordinatorConfig, self.config),
                group_configs=self.group_configs,
            )
            producer_ids = ProducerIdManager(self.zk, self.config.broker_id)
            marker_channel = TransactionMarkerChannel(
                self.metadata_cache, f"broker-{self.config.broker_id}-txn-markers", self.client_security
            )
            txn_coordinator = TransactionCoordinator(
                coordinator_log,
                derive(TransactionConfig, self.config),
                marker_channel,
                producer_ids.generate,
            )
            txn_verification = AddPartitionsToTxnManager(
                self.config.broker_id,
                self.metadata_cache,
                txn_coordinator.manager.partition_for,
                txn_coordinator.verify_partitions,
                f"broker-{self.config.broker_id}-txn-verification",
                self.client_security,
            )
            txn_verification.enabled = self.config["transaction.partition.verification.enable"]
            self.config_manager.on_broker_config.append(
                lambda config: setattr(txn_verification, "enabled", config["transaction.partition.verification.enable"])
            )
            share_coordinator = ShareCoordinator(
                coordinator_log, derive(ShareCoordinatorConfig, self.config), clock_ms=lambda: int(time.time() * 1000)
            )

            async def ensure_share_state_topic() -> None:
                spec = internal_topic_spec(context, SHARE_GROUP_STATE_TOPIC)
                if spec is not None:
                    await admin_manager.auto_create_topic(
                        context, spec.name, spec.partitions, spec.replication_factor, spec.configs
                    )

            share_persister = SharePersister(
                self.config.broker_id,
                self.metadata_cache,
                share_coordinator.config.num_partitions,
                share_coordinator,
                ensure_share_state_topic,
                f"broker-{self.config.broker_id}-share-state",
                self.client_security,
            )
            share_manager = SharePartitionManager(
                self.replica_manager,
                self.metadata_cache,
                ShareConfig(
                    self.config["group.share.record.lock.duration.ms"],
                    self.config["group.share.delivery.count.limit"],
                    self.config["group.share.partition.max.record.locks"],
                ),
                lambda: trio.current_time() * 1000,
                self.group_configs,
                share_persister,
            )
            context = BrokerContext(
                self.config,
                cluster_id,
                self.metadata_cache,
                self.replica_manager,
                zk=self.zk,
                controller=self.controller,
                topic_configs=self.topic_configs,
                producer_ids=producer_ids,
                group_coordinator=group_coordinator,
                txn_coordinator=txn_coordinator,
                txn_verification=txn_verification,
                leadership_listeners=(group_coordinator, txn_coordinator, share_manager, share_coordinator),
                dynamic_config=self.dynamic_config,
                config_manager=self.config_manager,
                authorizer=self.authorizer,
                acl_store=self.acl_store,
                quotas=self.quotas,
                share_manager=share_manager,
                share_coordinator=share_coordinator,
                client_metrics=self.client_metrics,
                partition_metadata=PartitionMetadataClient(
                    self.config.broker_id,
                    self.metadata_cache,
                    self.replica_manager,
                    f"broker-{self.config.broker_id}-partition-metadata",
                    self.client_security,
                ),
            )
            handlers = served_handlers(share_groups=self.config["group.share.enable"])
            self.server = KafkaServer(
                self.config.listeners,
                handlers,
                context,
                lambda: advertised_api_versions(handlers),
                derive(SocketServerConfig, self.config),
                transports=self.transports,
                inline_handlers=INLINE_HANDLERS,
                request_quota=RequestQuota(self.quotas.request),
            )
            self.server.disconnect_listeners.append(share_manager.on_disconnect)
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with trio.open_nursery() as nursery:
                    if self.acl_store is not None:
                        await nursery.start(self.acl_store.run)  # ACLs are loaded before anything is served
                    await nursery.start(txn_verification.run)  # the Produce handler starts its tasks there
                    try:
                        bound = await nursery.start(self.server.run)
                    except ListenerBindError as e:
                        raise BrokerStartupError(str(e)) from None
                    await nursery.start(self.log_manager.run, self.replica_manager.high_watermark_of)
                    await nursery.start(self.log_cleaner.run)
                    await nursery.start(self.replica_manager.run)
                    await nursery.start(group_coordinator.run)
                    await nursery.start(share_coordinator.run)
                    await nursery.start(share_persister.run)
                    await nursery.start(share_manager.run)
                    await nursery.start(marker_channel.run)
                    await nursery.start(txn_coordinator.run)
                    await nursery.start(self.controller.run)
                    await nursery.start(self.config_manager.run)
                    nursery.start_soon(self.session.run)
                    nursery.start_soon(self._expire_client_metrics)
                    metrics = await self._start_metrics(nursery, group_coordinator, txn_coordinator, share_manager)
                    registration = await self._register(bound)
                    endpoints = ", ".join(f"{n}://{h}:{p}" for n, h, p in registration.endpoints)
                    print(
                        f"minikafka broker {self.config.broker_id} started, listening on {endpoints}{metrics}",
                        flush=True,
                    )
                    log.info(
                        "broker %d started (cluster %s, broker epoch %d)",
                        self.config.broker_id,
                        cluster_id,
                        self.replica_manager.broker_epoch,
                    )
                    freeze_startup_heap()
                    task_status.started(bound)
                    async for signum in signals:
                        log.info("received %s: shutting down", signal.Signals(signum).name)
                        break
                    if self.config["controlled.shutdown.enable"]:
                        await self._controlled_shutdown()
                    await self.server.stop()
                    nursery.cancel_scope.cancel()
            await self._shutdown()
        finally:
            with trio.CancelScope(shield=True):
                await self.zk.close()

    async def _start_metrics(self, nursery: trio.Nursery, group_coordinator, txn_coordinator, share_manager) -> str:
        """Serve Prometheus metrics and the web console when `metrics.port` >= 0; returns the
        readiness line's suffix naming the URL ("" when off) and sets `console_url` (registered
        in ZooKeeper, where the other brokers' consoles find it). Raises BrokerStartupError if
        the port is taken."""
        port = self.config["metrics.port"]
        if port < 0:
            return ""
        registry = CollectorRegistry()
        registry.register(
            BrokerCollector(self.server, self.replica_manager, self.controller, group_coordinator, share_manager)
        )
        registry.register(ClientMetricsCollector(self.client_metrics))
        # the process's own: python_gc_* (collections and the objects the cycle collector freed,
        # per generation), process_* (CPU seconds, resident memory, open fds) and python_info, as
        # prometheus_client's default registry exposes them for any Python service
        GCCollector(registry)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        host = self.config["metrics.host"]
        console = self._console(group_coordinator, txn_coordinator, share_manager)
        try:
            tls = server_context(console.auth.tls) if console.auth.tls is not None else None
        except SecurityConfigError as e:
            raise BrokerStartupError(f"the web console's TLS: {e}") from None
        try:
            bound = await nursery.start(serve_metrics, host, port, registry, console, tls)
        except OSError as e:
            raise BrokerStartupError(f"metrics.port {port}: {e}") from None
        shown = host or next((a.host for a in self.config.advertised_listeners if a.host), "127.0.0.1")
        inter_broker = self.config.inter_broker_listener.name
        reachable = next((a.host for a in self.config.advertised_listeners if a.name == inter_broker and a.host), None)
        console_host = host if host not in ("", "0.0.0.0", "::") else reachable or "127.0.0.1"
        scheme = "https" if tls is not None else "http"
        self.console_url = f"{scheme}://{console_host}:{bound}"
        return f" (metrics http://{shown}:{bound}/metrics, console {scheme}://{shown}:{bound}/)"

    def _console(self, group_coordinator, txn_coordinator, share_manager=None) -> Console:
        """The web console (`console/`) over this broker's state."""
        broker_id = self.config.broker_id
        security = self.client_security
        authorization = None
        if security.protocol.uses_sasl and security.username is not None:
            token = base64.b64encode(f"{security.username}:{security.password or ''}".encode()).decode()
            authorization = f"Basic {token}"

        async def peers() -> dict[int, str]:
            ids = [int(child) for child in await self.zk.get_children(znodes.BROKER_IDS)]
            found = await self.zk.get_many([znodes.broker_path(i) for i in ids])
            registrations = [znodes.BrokerRegistration.decode(i, f[0]) for i, f in zip(ids, found) if f is not None]
            return {r.broker_id: r.console_url for r in registrations if r.console_url}

        return Console(
            broker_id,
            lambda: local_snapshot(
                broker_id,
                self.metadata_cache,
                self.replica_manager,
                self.controller,
                group_coordinator,
                txn_coordinator,
                share_manager,
                self.server,
                self.client_metrics,
            ),
            lambda topic, partition, offset, limit: read_records(self.replica_manager, topic, partition, offset, limit),
            peers,
            console_auth(
                self.config.listener_security(),
                self.credentials,
                self.authorizer,
                self.config.inter_broker_listener.name,
            ),
            authorization,
            client_context(security.ssl) if security.ssl is not None else None,
        )

    def _session_keeper(self) -> SessionKeeper:
        """Kafka's session handling (`broker.zk_session`): keep serving while ZooKeeper is
        unreachable; on expiry resign as controller; under every new session register again (a
        new broker epoch), rejoin the election and re-read the change notifications. Its
        `register_once` is also the start-up registration."""

        def expired() -> None:
            self.controller.post(controller_events.Expire())

        def registered(czxid: int) -> None:
            self.replica_manager.broker_epoch = czxid
            self.controller.post(controller_events.Reelect())
            self.config_manager.wake()
            if self.acl_store is not None:
                self.acl_store.wake()

        def data() -> bytes:
            assert self.registration is not None, "registered at start-up"
            return self.registration.encode()

        return SessionKeeper(self.zk, znodes.broker_path(self.config.broker_id), data, expired, registered)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away first (ControlledShutdown v3), retrying up to
        controlled.shutdown.max.retries times within 30 s; then shut down regardless."""
        body = {"broker_id": self.config.broker_id, "broker_epoch": self.replica_manager.broker_epoch}
        backoff = min(self.config["controlled.shutdown.retry.backoff.ms"] / 1000, 1.0)
        with trio.move_on_after(30):
            for attempt in range(max(1, self.config["controlled.shutdown.max.retries"])):
                try:
                    if self.controller.active:
                        code, remaining = await self.controller.request(
                            lambda reply: controller_events.ControlledShutdown(
                                body["broker_id"], body["broker_epoch"], reply
                            )
                        )
                    else:
                        found = await self.zk.get_or_none(znodes.CONTROLLER)
                        controller_id = znodes.decode_controller(found[0]) if found else -1
                        reg = await self.zk.get_or_none(znodes.broker_path(controller_id))
                        if reg is None:
                            raise ConnectionClosed("no controller")
                        host, port = znodes.BrokerRegistration.decode(controller_id, reg[0]).endpoint_for(
                            self.config.inter_broker_listener.name
                        )
                        async with Connection.open(host, port, security=self.client_security) as conn:
                            response = await conn.request(ApiKey.CONTROLLED_SHUTDOWN, body, timeout_s=10)
                        code, remaining = response.error_code, response.remaining_partitions
                    if code == 0 and not remaining:
                        log.info("controlled shutdown succeeded")
                        await self._drain_controller_requests()
                        return
                    log.info(
                        "controlled shutdown attempt %d: error %s, %d partitions still led here",
                        attempt + 1,
                        code,
                        len(remaining),
                    )
                except (ConnectionClosed, trio.TooSlowError) as e:
                    log.info("controlled shutdown attempt %d failed: %s", attempt + 1, e)
                await trio.sleep(backoff)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    async def _drain_controller_requests(self) -> None:
        """As the active controller: wait (at most 10 s) until the other brokers have answered the
        LeaderAndIsr and UpdateMetadata requests the controlled shutdown sent, so they name the new
        leaders before this controller goes (the next one is elected only after it has)."""
        channels = self.controller.channels if self.controller.active else None
        if channels is not None and not await channels.drain(10, except_broker=self.config.broker_id):
            log.warning("controlled shutdown: some brokers did not answer the controller's last requests in 10 s")

    async def _shutdown(self) -> None:
        with trio.CancelScope(shield=True):
            self.log_manager.write_high_watermarks(self.replica_manager.high_watermarks())
            await trio.to_thread.run_sync(self.log_manager.shutdown)
            try:
                await self.zk.delete(znodes.broker_path(self.config.broker_id))
            except Exception as e:  # the session's end removes the ephemeral node anyway
                log.warning("deregistration failed: %s", e)
            log.info("broker %d stopped cleanly", self.config.broker_id)


def raise_open_files_limit() -> None:
    """Raise the soft limit on open files to the hard one, as Kafka's start scripts advise: every
    connection and segment file is a descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            log.info("open files limit raised from %d to %d", soft, hard)
        except (ValueError, OSError) as e:
            log.warning("could not raise the open files limit from %d: %s", soft, e)


def configure_logging(broker_id: int, log_file: Path | None, max_bytes: int, backups: int) -> None:
    """The broker's log: INFO and above, to `log_file` rotated by size (the standard library's
    RotatingFileHandler: at `max_bytes` the file becomes FILE.1 and `backups` of them are kept), or
    to standard error without a file."""
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=max_bytes, backupCount=backups)
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s [broker {broker_id}] %(name)s: %(message)s"))
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(handler)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


#: Python's cyclic garbage collector thresholds for the broker (gen0 allocations, then gen1 and
#: gen2 collection counts; CPython's defaults are 700, 10, 10). With the defaults, objects that live
#: for a request's round trip (a delayed produce, a slot, a response) outlive several gen0 passes
#: and reach gen2, and the full collections they trigger traverse the whole heap: measured at 100
#: producer connections, 39 us of a 105 us Produce went to the collector, and each full pass stalled
#: the event loop for tens of ms. At 10000 they die young; cycles are still collected.
GC_THRESHOLDS = (10_000, 10, 10)


def freeze_startup_heap() -> None:
    """Collect once, then move everything alive after startup (modules, configuration, loaded
    logs' state) to the collector's permanent generation, so later full collections do not
    traverse it (CPython's gc.freeze). Only what is alive is frozen (the collection runs first);
    objects freed by reference counting are still freed."""
    gc.collect()
    gc.freeze()


def run(args: argparse.Namespace) -> int:
    """Entry point of `minikafka broker`; returns the exit status."""
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        config = load_config(args.config, args.override, environ=dict(os.environ) if args.env_config else None)
    except ConfigError as e:
        print(f"minikafka broker: configuration error: {e}", file=sys.stderr)
        return 2
    configure_logging(config.broker_id, args.log_file, args.log_file_max_bytes, args.log_file_backups)
    raise_open_files_limit()
    failure = None
    try:
        broker = Broker(config)
    except SecurityConfigError as e:  # a keystore or truststore that cannot be loaded
        print(f"minikafka broker: configuration error: {e}", file=sys.stderr)
        return 2
    try:
        trio.run(broker.run)
    except* BrokerStartupError as group:  # raised inside the broker's nursery, so grouped
        failure = group.exceptions[0]
    if failure is not None:
        print(f"minikafka broker: cannot start: {failure}", file=sys.stderr)
        return 1
    return 0
