"""The broker's side of KIP-714 (Kafka's `ClientMetricsManager`), as pure state: the
subscriptions, the client instances that asked for them, and the latest value of each metric
series they pushed. No I/O; the clock (monotonic ms) is passed in.

- GetTelemetrySubscriptions (key 71): a client sends the zero id first and is given a new client
  instance id. Its subscription is every CLIENT_METRICS subscription that matches it: the union
  of their metric prefixes, pushed at the shortest of their intervals. With none, it is told an
  empty list and the default interval, and pushes nothing. The subscription id is a CRC32C of
  the prefixes, the interval and the instance id: it changes when the subscription does. Asking
  again before the push interval has passed is THROTTLING_QUOTA_EXCEEDED, unless the last push
  failed with UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE.
- PushTelemetry (key 72), checked in Kafka's order:
  - after a terminating push: INVALID_REQUEST;
  - another subscription id: UNKNOWN_SUBSCRIPTION_ID (the client then asks again);
  - sooner than the interval after the last push, unless terminating: THROTTLING_QUOTA_EXCEEDED;
  - a codec outside `ACCEPTED_COMPRESSION`: UNSUPPORTED_COMPRESSION_TYPE;
  - over `telemetry.max.bytes`: TELEMETRY_TOO_LARGE;
  - not decodable OTLP `MetricsData` (`otlp.py`): INVALID_RECORD.
  An accepted push replaces the latest value of each series it carries.
- Bounds: at most `max_instances` client instances and `max_series` series in all. A new
  instance or series past them is dropped and counted (`dropped_instances`, `dropped_series`).
  An instance is forgotten twice its push interval after it last asked or pushed (`expire`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import crc32c

from client_metrics import otlp
from client_metrics.config import DEFAULT_INTERVAL_MS, ClientInfo, Subscription
from protocol import record_batch as rb
from protocol.errors import ErrorCode

ZERO = uuid.UUID(int=0)
#: Kafka's order of preference
ACCEPTED_COMPRESSION = (rb.ZSTD, rb.LZ4, rb.GZIP, rb.SNAPPY)
#: a cumulative counter's latest value is what a Prometheus scrape wants
DELTA_TEMPORALITY = False


@dataclass
class ClientInstance:
    instance_id: uuid.UUID
    client: ClientInfo
    principal: str
    listener: str
    subscription_id: int = 0
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    last_get_ms: float | None = None
    last_push_ms: float | None = None
    last_seen_ms: float = 0.0
    last_error: int = ErrorCode.NONE
    terminated: bool = False
    #: (metric name, data point attributes) -> latest value
    series: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Subscribed:
    """GetTelemetrySubscriptions' answer."""

    error_code: int
    instance_id: uuid.UUID
    subscription_id: int = 0
    interval_ms: int = DEFAULT_INTERVAL_MS
    metrics: tuple[str, ...] = ()


class ClientMetricsManager:
    def __init__(
        self, now_ms: Callable[[], float], *, max_bytes: int, max_instances: int = 10_000, max_series: int = 100_000
    ) -> None:
        self.now_ms = now_ms
        self.max_bytes = max_bytes
        self.max_instances = max_instances
        self.max_series = max_series
        self.subscriptions: dict[str, Subscription] = {}
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        self.series_count = 0
        self.dropped_instances = 0
        self.dropped_series = 0
        self.pushes = 0
        self.refused: dict[int, int] = {}  # error code -> pushes refused with it

    # ---- subscriptions ---------------------------------------------------------------------------
    def set_subscription(self, name: str, subscription: Subscription | None) -> None:
        """A CLIENT_METRICS resource changed (None: deleted); instances get the new set when
        they next ask (their pushes meanwhile are UNKNOWN_SUBSCRIPTION_ID)."""
        if subscription is None:
            self.subscriptions.pop(name, None)
        else:
            self.subscriptions[name] = subscription
        for instance in self.instances.values():
            metrics, interval = self._subscription_for(instance.client)
            if (metrics, interval) != (instance.metrics, instance.interval_ms):
                instance.subscription_id = -1  # stale: the next push is told to ask again

    def _subscription_for(self, client: ClientInfo) -> tuple[tuple[str, ...], int]:
        matched = [s for s in self.subscriptions.values() if s.matches(client)]
        if not matched:
            return (), DEFAULT_INTERVAL_MS
        prefixes = sorted({p for s in matched for p in s.metrics})
        return (("",) if "" in prefixes else tuple(prefixes)), min(s.interval_ms for s in matched)

    # ---- GetTelemetrySubscriptions -----------------------------------------------------------------
    def get_subscriptions(
        self, instance_id: uuid.UUID, client: ClientInfo, principal: str, listener: str
    ) -> Subscribed:
        now = self.now_ms()
        if instance_id == ZERO:
            instance_id = uuid.uuid4()
        instance = self._instance(instance_id, client, principal, listener)
        if instance is None:
            return Subscribed(ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance_id)
        metrics, interval = self._subscription_for(instance.client)
        retry_allowed = instance.last_error in (
            ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        )
        changed = (metrics, interval) != (instance.metrics, instance.interval_ms) or instance.subscription_id == -1
        if instance.last_get_ms is not None and now - instance.last_get_ms < instance.interval_ms:
            if not retry_allowed and not changed:
                return Subscribed(ErrorCode.THROTTLING_QUOTA_EXCEEDED, instance_id)
        instance.metrics, instance.interval_ms = metrics, interval
        instance.subscription_id = _subscription_id(metrics, interval, instance_id)
        instance.last_get_ms = instance.last_seen_ms = now
        instance.last_error = ErrorCode.NONE
        return Subscribed(ErrorCode.NONE, instance_id, instance.subscription_id, interval, metrics)

    def _instance(
        self, instance_id: uuid.UUID, client: ClientInfo, principal: str, listener: str
    ) -> ClientInstance | None:
        instance = self.instances.get(instance_id)
        if instance is None:
            if len(self.instances) >= self.max_instances:
                self.dropped_instances += 1
                return None
            instance = self.instances[instance_id] = ClientInstance(
                instance_id, replace(client, client_instance_id=str(instance_id)), principal, listener
            )
        return instance

    # ---- PushTelemetry ---------------------------------------------------------------------------
    def push(
        self,
        instance_id: uuid.UUID,
        subscription_id: int,
        terminating: bool,
        codec: int,
        payload: bytes,
        client: ClientInfo,
        principal: str,
        listener: str,
    ) -> int:
        """The error code PushTelemetry answers (NONE when accepted)."""
        now = self.now_ms()
        instance = self.instances.get(instance_id)
        if instance is None:  # unknown here (a broker restarted, or another broker answered the get)
            instance = self._instance(instance_id, client, principal, listener)
            if instance is None:
                return self._refuse(None, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
            instance.subscription_id = -1
        instance.last_seen_ms = now
        if instance.terminated:
            return self._refuse(instance, ErrorCode.INVALID_REQUEST)
        if subscription_id != instance.subscription_id:
            return self._refuse(instance, ErrorCode.UNKNOWN_SUBSCRIPTION_ID)
        if not terminating and instance.last_push_ms is not None and now - instance.last_push_ms < instance.interval_ms:
            return self._refuse(instance, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        instance.last_push_ms = now
        if codec not in ACCEPTED_COMPRESSION and codec != rb.NONE:
            return self._refuse(instance, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if len(payload) > self.max_bytes:
            return self._refuse(instance, ErrorCode.TELEMETRY_TOO_LARGE)
        if terminating:
            instance.terminated = True
        if payload:
            try:
                samples = otlp.decode(codec, payload, self.max_bytes)
            except otlp.MalformedMetrics:
                return self._refuse(instance, ErrorCode.INVALID_RECORD)
            self._record(instance, samples)
        instance.last_error = ErrorCode.NONE
        self.pushes += 1
        return ErrorCode.NONE

    def _refuse(self, instance: ClientInstance | None, error: ErrorCode) -> int:
        if instance is not None:
            instance.last_error = error
        self.refused[error] = self.refused.get(error, 0) + 1
        return error

    def _record(self, instance: ClientInstance, samples: list[otlp.Sample]) -> None:
        for name, labels, value in samples:
            if not any(name.startswith(p) for p in instance.metrics):
                continue  # not subscribed: a client may send more than it was asked for
            key = (name, labels)
            if key not in instance.series:
                if self.series_count >= self.max_series:
                    self.dropped_series += 1
                    continue
                self.series_count += 1
            instance.series[key] = value

    # ---- ageing and views ----------------------------------------------------------------------------
    def expire(self) -> int:
        """Forget instances silent for twice their push interval, or terminated; -> how many."""
        now = self.now_ms()
        gone = [
            i for i, inst in self.instances.items() if inst.terminated or now - inst.last_seen_ms > 2 * inst.interval_ms
        ]
        for instance_id in gone:
            self.series_count -= len(self.instances.pop(instance_id).series)
        return len(gone)

    def views(self) -> Iterator[ClientInstance]:
        """The instances, oldest first."""
        return iter(list(self.instances.values()))


def _subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    digest = crc32c.crc32c(f"{','.join(metrics)}|{interval_ms}|{instance_id}".encode())
    return digest - (1 << 32) if digest >= 1 << 31 else digest  # an int32
