"""Client quotas (KIP-13, KIP-55, KIP-124; Kafka's `ClientQuotaManager` and its default
`QuotaCallback`): which quota applies to a (user, client-id), and how long a client over it is
throttled. Pure: no I/O, the time is passed in (ms, one monotonic clock).

Quotas are configured per entity: a user, a client id, or both, each a name or the default
(`<default>`, DEFAULT). The most specific configured entity wins, in Kafka's order:

    user+client, user+<default> client, user, <default> user+client,
    <default> user+<default> client, <default> user, client, <default> client

and names the sensor the client shares: a user-level quota is shared by all that user's clients,
a client-level one by every user's client of that id. A client with no quota is never throttled.

`record(user, client_id, value, now_ms)` adds `value` (bytes; for request quotas, handler ms) to
the sensor and returns the throttle time (ms) Kafka would answer: 0 within the quota, else the
time for the windowed rate to fall back to it, at most the whole window (`samples * window_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.quota.rate import WindowedRate

DEFAULT = "<default>"

#: Kafka's quota config keys, per quota type (`QuotaConfigs`)
PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
CONTROLLER_MUTATION = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST, CONTROLLER_MUTATION)

#: an entity: (user or DEFAULT or None, client id or DEFAULT or None); None = not part of it
Entity = tuple[str | None, str | None]


def _precedence(user: str, client_id: str) -> tuple[tuple[Entity, tuple[str, str]], ...]:
    """(configured entity to look up, the sensor key it gives) in Kafka's order."""
    return (
        ((user, client_id), (user, client_id)),
        ((user, DEFAULT), (user, client_id)),
        ((user, None), (user, "")),
        ((DEFAULT, client_id), (user, client_id)),
        ((DEFAULT, DEFAULT), (user, client_id)),
        ((DEFAULT, None), (user, "")),
        ((None, client_id), ("", client_id)),
        ((None, DEFAULT), ("", client_id)),
    )


@dataclass
class Sensor:
    rate: WindowedRate
    bound: float
    throttled: int = 0  # responses throttled
    last_throttle_ms: float = 0.0


@dataclass
class ClientQuotaManager:
    """One quota type (produce, fetch, request or controller mutation)."""

    name: str
    samples: int = 11
    window_ms: int = 1000
    quotas: dict[Entity, float] = field(default_factory=dict)
    sensors: dict[tuple[str, str], Sensor] = field(default_factory=dict)

    @property
    def max_throttle_ms(self) -> float:
        return float(self.samples * self.window_ms)

    def set_quota(self, entity: Entity, bound: float | None) -> None:
        """Configure (or with None remove) the quota of `entity`; sensors are re-resolved (their
        rates start again) only when a bound changed."""
        if self.quotas.get(entity) == bound:
            return
        if bound is None:
            self.quotas.pop(entity, None)
        else:
            self.quotas[entity] = bound
        self.sensors.clear()  # the next request finds its (possibly new) quota and sensor

    def quota_for(self, user: str, client_id: str) -> tuple[float, tuple[str, str]] | None:
        """(bound, sensor key) of the most specific configured quota; None when there is none."""
        if not self.quotas:
            return None
        for entity, key in _precedence(user, client_id):
            bound = self.quotas.get(entity)
            if bound is not None:
                return bound, key
        return None

    def _sensor(self, user: str, client_id: str) -> Sensor | None:
        found = self.quota_for(user, client_id)
        if found is None:
            return None
        bound, key = found
        sensor = self.sensors.get(key)
        if sensor is None:
            sensor = self.sensors[key] = Sensor(WindowedRate(self.samples, self.window_ms), bound)
        return sensor

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record `value` for the client; the throttle time (ms) to answer."""
        sensor = self._sensor(user, client_id)
        if sensor is None:
            return 0
        sensor.rate.record(value, now_ms)
        throttle = self._throttle_ms(sensor, now_ms)
        sensor.last_throttle_ms = throttle
        if throttle > 0:
            sensor.throttled += 1
        return throttle

    def _throttle_ms(self, sensor: Sensor, now_ms: float) -> int:
        return int(min(sensor.rate.throttle_ms(sensor.bound, now_ms), self.max_throttle_ms))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Take back a recorded value (a throttled fetch sends no records)."""
        sensor = self._sensor(user, client_id)
        if sensor is not None:
            sensor.rate.unrecord(value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take within one quota window (Kafka's getMaxValueInQuotaWindow:
        bound * (samples - 1) windows); None without a quota. Fetches are capped at it, so one
        response can never be larger than the quota lets through."""
        found = self.quota_for(user, client_id)
        if found is None:
            return None
        return found[0] * (self.samples - 1) * self.window_ms / 1000

    def would_throttle(self, user: str, client_id: str, now_ms: float) -> int:
        """The throttle time the client is already at, recording nothing (strict quotas, KIP-599)."""
        sensor = self._sensor(user, client_id)
        return 0 if sensor is None else self._throttle_ms(sensor, now_ms)


@dataclass
class QuotaManagers:
    """Kafka's `QuotaFactory.QuotaManagers`: one manager per quota type."""

    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    request: ClientQuotaManager
    controller_mutation: ClientQuotaManager

    @classmethod
    def create(cls, samples: int = 11, window_ms: int = 1000) -> QuotaManagers:
        return cls(
            ClientQuotaManager("Produce", samples, window_ms),
            ClientQuotaManager("Fetch", samples, window_ms),
            ClientQuotaManager("Request", samples, window_ms),
            # Kafka's controller mutation quota uses 1-second samples over quota.window.num too
            ClientQuotaManager("ControllerMutation", samples, window_ms),
        )

    def by_key(self) -> dict[str, ClientQuotaManager]:
        return {
            PRODUCE: self.produce,
            FETCH: self.fetch,
            REQUEST: self.request,
            CONTROLLER_MUTATION: self.controller_mutation,
        }

    def apply_entity_config(self, entity: Entity, config: dict[str, str]) -> None:
        """An entity's stored config (its quota keys; others, like SCRAM credentials, ignored)."""
        for key, manager in self.by_key().items():
            value = config.get(key)
            try:
                manager.set_quota(entity, float(value) if value is not None else None)
            except ValueError:
                manager.set_quota(entity, None)
