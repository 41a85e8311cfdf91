"""KIP-714 client metrics subscriptions from our own client (what `kafka-client-metrics.sh` does):
CLIENT_METRICS config resources (type 16) listed with ListConfigResources (key 74), described
with DescribeConfigs and changed with IncrementalAlterConfigs. Raises KafkaError."""

from __future__ import annotations

from client import admin
from client.cluster import Cluster
from client.groups import _raise
from protocol.api_keys import ApiKey

CLIENT_METRICS = 16
SET, DELETE = 0, 1
KEYS = ("metrics", "interval.ms", "match")


async def list_subscriptions(cluster: Cluster) -> list[str]:
    """The names of the subscriptions, sorted."""
    await cluster.refresh_metadata([])
    conn = await cluster.any_connection()
    r = await conn.request(ApiKey.LIST_CONFIG_RESOURCES, {"resource_types": [CLIENT_METRICS]})
    _raise(r.error_code, "ListConfigResources")
    return sorted(c.resource_name for c in r.config_resources)


async def describe_subscription(cluster: Cluster, name: str) -> dict[str, str]:
    """key -> value of one subscription (the defaults where unset)."""
    return {c.name: c.value or "" for c in await admin.describe_configs(cluster, CLIENT_METRICS, name)}


async def alter_subscription(cluster: Cluster, name: str, configs: dict[str, str | None]) -> None:
    """SET each key with a value, DELETE each with None."""
    ops: list[tuple[str, int, str | None]] = [(k, SET if v is not None else DELETE, v) for k, v in configs.items()]
    error, message = await admin.incremental_alter_configs(cluster, CLIENT_METRICS, name, ops)
    _raise(error, message or f"altering client metrics resource {name}")


async def delete_subscription(cluster: Cluster, name: str) -> None:
    await alter_subscription(cluster, name, dict.fromkeys(KEYS))
