"""The cluster as a client sees it: bootstrap, metadata, one connection per broker, routing to
partition leaders, and retries with exponential backoff on Kafka's retriable errors.

`async with Cluster.open(["127.0.0.1:9092"]) as cluster:` owns its connections (each in the
cluster's nursery). `await cluster.refresh_metadata()` learns brokers and partition leaders;
`await cluster.leader_connection(topic, partition)` routes; `await cluster.retry(op)` runs
`op()` until it succeeds, raising the last error after `retries` attempts (retriable errors:
`protocol.errors.RETRIABLE`, plus a broken connection).
"""

from __future__ import annotations

import contextlib
import logging
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from client.connection import Connection, ConnectionClosed, unwrap_single
from protocol.api_keys import ApiKey
from protocol.errors import RETRIABLE, ErrorCode
from protocol.errors import KafkaError as BaseKafkaError
from protocol.types import ZERO_UUID
from security.config import ClientSecurity

log = logging.getLogger(__name__)
T = TypeVar("T")


class KafkaError(BaseKafkaError):
    """A Kafka error code answered by a broker (`error_code`), with where it happened."""

    def __init__(self, code: int, where: str = ""):
        name = ErrorCode(code).name
        super().__init__(f"{name}{f' ({where})' if where else ''}", code)

    @property
    def retriable(self) -> bool:
        return self.error_code in RETRIABLE


def parse_bootstrap(servers: str | list[str]) -> list[tuple[str, int]]:
    """'host:port,host:port' -> [(host, port)]; raises ValueError naming the bad entry."""
    items = servers.split(",") if isinstance(servers, str) else servers
    out = []
    for item in items:
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item.strip()!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Metadata:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    topics: dict[str, dict[int, PartitionInfo]] = field(default_factory=dict)
    topic_errors: dict[str, ErrorCode] = field(default_factory=dict)
    #: topic name -> topic id (Metadata v10+; the zero UUID when the broker has none)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)


class Cluster:
    def __init__(
        self,
        bootstrap: list[tuple[str, int]],
        nursery: trio.Nursery,
        *,
        client_id: str,
        retries: int,
        backoff_ms: int,
        max_backoff_ms: int,
        request_timeout_ms: int,
        security: ClientSecurity | None = None,
    ):
        self.bootstrap = bootstrap
        self.security = security
        self._nursery = nursery
        self.client_id = client_id
        self.retries = retries
        self.backoff_ms = backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.request_timeout_s = request_timeout_ms / 1000
        self.metadata = Metadata()
        self._connections: dict[tuple[str, int], Connection] = {}
        self._closers: dict[tuple[str, int], trio.CancelScope] = {}
        self._connecting: dict[tuple[str, int], trio.Event] = {}

    @classmethod
    @contextlib.asynccontextmanager
    async def open(
        cls,
        bootstrap: str | list[str],
        *,
        client_id: str = "minikafka",
        retries: int = 8,
        backoff_ms: int = 100,
        max_backoff_ms: int = 2000,
        request_timeout_ms: int = 30000,
        security: ClientSecurity | None = None,
    ) -> AsyncIterator[Cluster]:
        """`security`: TLS / SASL settings for every connection (None: PLAINTEXT)."""
        bootstrap_servers = parse_bootstrap(bootstrap)
        with unwrap_single():
            async with trio.open_nursery() as nursery:
                cluster = cls(
                    bootstrap_servers,
                    nursery,
                    client_id=client_id,
                    retries=retries,
                    backoff_ms=backoff_ms,
                    max_backoff_ms=max_backoff_ms,
                    request_timeout_ms=request_timeout_ms,
                    security=security,
                )
                try:
                    yield cluster
                finally:
                    nursery.cancel_scope.cancel()

    # ---- connections -----------------------------------------------------------------------------
    async def connect(self, host: str, port: int) -> Connection:
        """A live connection to host:port (opened once and shared; a broken one is replaced)."""
        key = (host, port)
        while True:  # every await below may change the maps: check them again afterwards
            if key in self._connecting:
                await self._connecting[key].wait()
                continue
            cached = self._connections.get(key)
            if cached is None:
                break
            if not cached.closed:
                return cached
            self.drop(cached)  # the broker went away: let its holder exit
            await trio.sleep(0.01)
        ready = self._connecting[key] = trio.Event()  # no await since the checks: this task owns the key
        try:
            conn, scope = await self._nursery.start(self._hold, host, port)
            self._connections[key], self._closers[key] = conn, scope
            return conn
        finally:
            del self._connecting[key]
            ready.set()

    async def _hold(self, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            try:
                async with Connection.open(host, port, client_id=self.client_id, security=self.security) as conn:
                    task_status.started((conn, scope))
                    await trio.sleep_forever()
            finally:
                self._connections.pop((host, port), None)
                self._closers.pop((host, port), None)

    def drop(self, conn: Connection) -> None:
        """Close a connection that failed; the next request reconnects."""
        scope = self._closers.get((conn.host, conn.port))
        if scope is not None:
            scope.cancel()

    async def broker_connection(self, broker_id: int) -> Connection:
        if broker_id not in self.metadata.brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} is not in the metadata")
        return await self.connect(*self.metadata.brokers[broker_id])

    async def any_connection(self) -> Connection:
        """A connection to any known broker, bootstrap servers first."""
        candidates = list(self.bootstrap) + [hp for hp in self.metadata.brokers.values() if hp not in self.bootstrap]
        errors = []
        for host, port in candidates:
            try:
                return await self.connect(host, port)
            except ConnectionClosed as e:
                errors.append(str(e))
        raise ConnectionClosed("no broker reachable: " + "; ".join(errors))

    # ---- metadata ---------------------------------------------------------------------------------
    async def refresh_metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Metadata:
        """Metadata for `topics` (None: all topics), merged into `self.metadata`; asks the
        brokers in turn until one answers (raises ConnectionClosed when none does). `auto_create`
        sets Metadata's allow_auto_topic_creation, as Kafka's producer does: a broker with
        auto.create.topics.enable creates a missing topic (answering LEADER_NOT_AVAILABLE meanwhile)."""
        names = None if topics is None else [{"name": t} for t in topics]
        body = {"topics": names, "allow_auto_topic_creation": auto_create}
        candidates = list(self.bootstrap) + [hp for hp in self.metadata.brokers.values() if hp not in self.bootstrap]
        response, errors = None, []
        for host, port in candidates:
            try:
                conn = await self.connect(host, port)
                response = await conn.request(ApiKey.METADATA, body, timeout_s=self.request_timeout_s)
                break
            except (ConnectionClosed, trio.TooSlowError) as e:
                errors.append(f"{host}:{port}: {e or 'timed out'}")
        if response is None:
            raise ConnectionClosed("no broker reachable: " + "; ".join(errors))
        md = self.metadata
        md.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        md.controller_id, md.cluster_id = response.controller_id, response.cluster_id
        for t in response.topics:
            md.topic_errors[t.name] = ErrorCode(t.error_code)
            if t.error_code == ErrorCode.NONE:
                md.topic_ids[t.name] = t.get("topic_id", ZERO_UUID)
                md.topics[t.name] = {
                    p.partition_index: PartitionInfo(
                        p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes)
                    )
                    for p in t.partitions
                }
            else:
                md.topics.pop(t.name, None)
        return md

    async def partitions(self, topic: str, auto_create: bool = False) -> dict[int, PartitionInfo]:
        """The topic's partitions from the cached metadata, fetched (with retries) when the topic
        is not cached yet (`auto_create`: see `refresh_metadata`). Raises KafkaError for an
        unknown topic once retries are spent."""
        parts = self.metadata.topics.get(topic)
        if parts is None:
            await self.retry(lambda refresh: self.partition_info(topic, 0, True, auto_create), "metadata")
            parts = self.metadata.topics[topic]
        return parts

    async def partition_info(
        self, topic: str, partition: int, refresh: bool = False, auto_create: bool = False
    ) -> PartitionInfo:
        if refresh or topic not in self.metadata.topics:
            await self.refresh_metadata([topic], auto_create)
        parts = self.metadata.topics.get(topic)
        if parts is None:
            raise KafkaError(self.metadata.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), topic)
        if partition not in parts:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
        return parts[partition]

    async def leader_connection(self, topic: str, partition: int, refresh: bool = False) -> Connection:
        info = await self.partition_info(topic, partition, refresh)
        if info.leader < 0:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
        return await self.broker_connection(info.leader)

    # ---- retries ----------------------------------------------------------------------------------
    async def retry(self, op: Callable[[bool], Awaitable[T]], what: str = "request") -> T:
        """Run `op(refresh)` until it returns; on a retriable KafkaError or a broken connection
        back off (exponential with jitter), refresh metadata on the next attempt, and try again,
        at most `retries` times."""
        delay = self.backoff_ms / 1000
        for attempt in range(self.retries + 1):
            try:
                return await op(attempt > 0)
            except (KafkaError, ConnectionClosed, trio.TooSlowError) as e:
                retriable = not isinstance(e, KafkaError) or e.retriable
                if not retriable or attempt == self.retries:
                    raise
                log.info("%s failed (%s); retry %d/%d in %.0f ms", what, e, attempt + 1, self.retries, delay * 1000)
                await trio.sleep(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.max_backoff_ms / 1000)
        raise AssertionError("unreachable")
