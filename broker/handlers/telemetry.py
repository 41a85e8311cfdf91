"""KIP-714's client metrics APIs over `client_metrics.manager.ClientMetricsManager`:
GetTelemetrySubscriptions (key 71) v0, PushTelemetry (72) v0, and ListConfigResources (74) v0-1
(v0, 3.8's ListClientMetricsResources: the CLIENT_METRICS subscriptions; v1: the resources of the
types asked, every type when none is: CLIENT_METRICS, GROUP configs, TOPIC and BROKER).

A client is matched on its client id (the request header), its software name and version (the
connection's ApiVersions v3+), its instance id and its source address and port. Listing needs
DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, cluster_allowed
from broker.config_ops import BROKER, CLIENT_METRICS, GROUP, TOPIC
from broker.server import Handler
from client_metrics.config import ClientInfo
from client_metrics.manager import ACCEPTED_COMPRESSION, DELTA_TEMPORALITY, ZERO
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from zk import admin, znodes

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


def _client(request: Request, instance_id) -> ClientInfo:
    host, _, port = request.peer.rpartition(":")
    name, version = request.client_software
    return ClientInfo(str(instance_id), request.client_id, name, version, host.strip("[]"), port)


async def get_telemetry_subscriptions(ctx: BrokerContext, request: Request):
    """GetTelemetrySubscriptions (key 71) v0: the client's instance id (a new one for the zero
    id), its subscription id, push interval (ms) and metric prefixes; THROTTLING_QUOTA_EXCEEDED
    when asked again within the interval (or past the broker's client instance bound)."""
    manager = ctx.client_metrics
    body = request.body
    if manager is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "client_instance_id": ZERO}
    got = manager.get_subscriptions(
        body.client_instance_id, _client(request, body.client_instance_id), request.principal, request.listener
    )
    return {
        "throttle_time_ms": 0,
        "error_code": got.error_code,
        "client_instance_id": got.instance_id if body.client_instance_id == ZERO else ZERO,
        "subscription_id": got.subscription_id,
        "accepted_compression_types": list(ACCEPTED_COMPRESSION),
        "push_interval_ms": got.interval_ms,
        "telemetry_max_bytes": manager.max_bytes,
        "delta_temporality": DELTA_TEMPORALITY,
        "requested_metrics": list(got.metrics),
    }


async def push_telemetry(ctx: BrokerContext, request: Request):
    """PushTelemetry (key 72) v0: the error of `ClientMetricsManager.push` (NONE, or
    UNKNOWN_SUBSCRIPTION_ID, THROTTLING_QUOTA_EXCEEDED, UNSUPPORTED_COMPRESSION_TYPE,
    TELEMETRY_TOO_LARGE, INVALID_RECORD, INVALID_REQUEST after a terminating push)."""
    manager = ctx.client_metrics
    body = request.body
    if manager is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR}
    error = manager.push(
        body.client_instance_id,
        body.subscription_id,
        body.terminating,
        body.compression_type,
        bytes(body.metrics or b""),
        _client(request, body.client_instance_id),
        request.principal,
        request.listener,
    )
    return {"throttle_time_ms": 0, "error_code": error}


async def list_config_resources(ctx: BrokerContext, request: Request):
    """ListConfigResources (key 74) v0-1: (name, type) of every stored config resource of the
    types asked (v0: CLIENT_METRICS only)."""
    if not cluster_allowed(ctx, request, Op.DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    asked = [CLIENT_METRICS] if request.api_version == 0 else list(request.body.resource_types)
    wanted = set(asked) if asked else {CLIENT_METRICS, GROUP, TOPIC, BROKER}
    unknown = wanted - {CLIENT_METRICS, GROUP, TOPIC, BROKER}
    if unknown:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "config_resources": []}
    found: list[dict] = []
    if ctx.zk is not None:
        paths = {
            CLIENT_METRICS: znodes.CONFIG_CLIENT_METRICS,
            GROUP: znodes.CONFIG_GROUPS,
            TOPIC: znodes.CONFIG_TOPICS,
        }
        for rtype in sorted(wanted & set(paths)):
            for name in sorted(await ctx.zk.get_children(paths[rtype])):
                if rtype == CLIENT_METRICS and not await admin.fetch_entity_config(ctx.zk, "client-metrics", name):
                    continue  # deleted: every key was removed
                found.append({"resource_name": name, "resource_type": rtype})
    if BROKER in wanted:  # every live broker is a config resource (KRaft lists them so)
        found += [{"resource_name": str(b), "resource_type": BROKER} for b in sorted(ctx.metadata_cache.brokers)]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": found}


HANDLERS: dict[int, Handler] = {
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: push_telemetry,
    ApiKey.LIST_CONFIG_RESOURCES: list_config_resources,
}
