"""DescribeConfigs (API 32, v0-4), AlterConfigs (33, v0-2) and IncrementalAlterConfigs (44,
v0-1), served by every broker as Kafka's ZooKeeper mode does (`ZkAdminManager`, `ConfigHelper`).

Resources: TOPIC (type 2, name = the topic), BROKER (type 4, name = this broker's id, or "" for
the cluster-wide default), GROUP (type 32, name = the group; KIP-932's share group configs,
`coordinator.group.group_config`, stored in `/config/groups/<group>`) and CLIENT_METRICS (type
16, name = the subscription; KIP-714, `client_metrics.config`, stored in
`/config/client-metrics/<name>`, authorized on the cluster as Kafka does). A broker resource naming another broker is INVALID_REQUEST ("Unexpected
broker id"), as clients must send it to that broker. Errors per resource: UNKNOWN_TOPIC_OR_PARTITION
for a missing topic, INVALID_TOPIC_EXCEPTION for an illegal name, INVALID_CONFIG for an unknown key,
a bad value or a key that cannot change at runtime, INVALID_REQUEST for duplicate keys, null values
or other resource types. Nothing is written unless every check of that resource passes, and
nothing at all with `validate_only`. Writes go to `/config/topics/<t>` or `/config/brokers/<id|
<default>>` with a change notification; this broker applies the change at once, the others when
the notification reaches them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.config import ConfigError
from broker.config_helper import describe_broker, describe_client_metrics, describe_group, describe_topic
from broker.config_ops import BROKER, CLIENT_METRICS, GROUP, TOPIC, ConfigOpError, apply_incremental, replace_all
from broker.dynamic_config import DEFAULT_ENTITY
from broker.server import Handler
from client_metrics import config as client_metrics_config
from coordinator.group import group_config
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_names import INTERNAL_TOPICS, is_valid_topic_name
from storage.config import parse_topic_config
from storage.topic_configs import TopicConfigs
from zk import admin, znodes

if TYPE_CHECKING:
    from broker.config_manager import DynamicConfigManager
    from broker.context import BrokerContext
    from broker.dynamic_config import DynamicBrokerConfig
    from protocol.api import Request
    from zk.client import ZkClient


_TYPE_NAMES = {TOPIC: "topic", BROKER: "broker", GROUP: "group", CLIENT_METRICS: "client metrics resource"}


class ResourceError(KafkaError):
    """A config resource a DescribeConfigs / AlterConfigs cannot serve, with its code."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message, code)


def _authorize(ctx: BrokerContext, request: Request, resource, operation: Op) -> None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker
    resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's `ConfigHelper` checks."""
    if resource.resource_type == TOPIC and not allowed(ctx, request, operation, Resource.TOPIC, resource.resource_name):
        raise ResourceError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
    if resource.resource_type in (BROKER, CLIENT_METRICS) and not cluster_allowed(ctx, request, operation):
        raise ResourceError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if resource.resource_type == GROUP and not allowed(ctx, request, operation, Resource.GROUP, resource.resource_name):
        raise ResourceError(ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")


def _resource(resource_type: int, name: str) -> str:
    """A resource in words for error messages: "topic 'demo'", "broker '1'"."""
    return f"{_TYPE_NAMES.get(resource_type, f'resource of type {resource_type}')} '{name}'"


def _served(ctx: BrokerContext) -> tuple[ZkClient, DynamicBrokerConfig, DynamicConfigManager]:
    """What the config APIs need, which every broker process has (a unit test serving a subset
    of the APIs without them does not serve these)."""
    zk, dynamic, manager = ctx.zk, ctx.dynamic_config, ctx.config_manager
    assert zk is not None and dynamic is not None and manager is not None, "config APIs need ZooKeeper"
    return zk, dynamic, manager


async def _check_topic(ctx: BrokerContext, name: str) -> None:
    if not is_valid_topic_name(name):
        raise ResourceError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name {name!r} is illegal")
    if await _served(ctx)[0].exists(znodes.topic_path(name)) is None:
        raise ResourceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")


def _require_name(name: str, kind: str) -> None:
    """A GROUP or CLIENT_METRICS resource must be named (INVALID_REQUEST)."""
    if not name:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"{kind} name must not be empty")


def _broker_entity(ctx: BrokerContext, name: str) -> str:
    """The znode name of a BROKER resource: this broker's id or `<default>`."""
    if name == "":
        return DEFAULT_ENTITY
    if name != str(ctx.broker_id):
        raise ResourceError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.broker_id} or empty string, but received {name}",
        )
    return name


# ---- DescribeConfigs ------------------------------------------------------------------------------
async def _describe_one(ctx: BrokerContext, resource) -> list[dict]:
    keys = None if resource.configuration_keys is None else list(resource.configuration_keys)
    if resource.resource_type == TOPIC:
        await _check_topic(ctx, resource.resource_name)
        overrides = await admin.fetch_entity_config(_served(ctx)[0], "topics", resource.resource_name)
        current = ctx.topic_configs
        view = TopicConfigs(
            current.defaults,
            min_insync_replicas=current.default_min_insync_replicas,
            unclean_leader_election_enable=current.default_unclean_leader_election_enable,
        )
        topic = resource.resource_name
        view.set(topic, overrides)
        return describe_topic(
            view.overrides(topic),
            view.log_config(topic),
            _served(ctx)[1],
            min_insync_replicas=view.min_insync_replicas(topic),
            unclean_leader_election_enable=view.unclean_leader_election_enable(topic),
            keys=keys,
        )
    if resource.resource_type == BROKER:
        entity = _broker_entity(ctx, resource.resource_name)
        return describe_broker(_served(ctx)[1], per_broker=entity != DEFAULT_ENTITY, keys=keys)
    if resource.resource_type == GROUP:
        _require_name(resource.resource_name, "Group")
        stored = await admin.fetch_entity_config(_served(ctx)[0], "groups", resource.resource_name)
        try:
            overrides = group_config.validate(stored, ctx.config)
        except group_config.GroupConfigError:
            overrides = {}  # written by an older broker with other rules: the defaults stand
        return describe_group(group_config.describe(overrides, ctx.config, keys))
    if resource.resource_type == CLIENT_METRICS:
        _require_name(resource.resource_name, "Client metrics subscription")
        stored = await admin.fetch_entity_config(_served(ctx)[0], "client-metrics", resource.resource_name)
        return describe_client_metrics(client_metrics_config.describe(stored, keys))
    raise ResourceError(
        ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type} for DescribeConfigs"
    )


def _for_version(entry: dict, version: int, include_synonyms: bool, include_docs: bool) -> dict:
    """The fields of one entry that `version` has: v0 `is_default`; v1+ `config_source` and
    `synonyms` (empty unless asked for); v3+ `config_type` and `documentation` (null unless asked)."""
    out = {k: entry[k] for k in ("name", "value", "read_only", "is_sensitive")}
    if version == 0:
        out["is_default"] = entry["is_default"]
        return out
    out["config_source"] = entry["config_source"]
    out["synonyms"] = entry["synonyms"] if include_synonyms else []
    if version >= 3:
        out["config_type"] = entry["config_type"]
        out["documentation"] = entry["documentation"] if include_docs else None
    return out


async def describe_configs(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    include_synonyms = version >= 1 and body.include_synonyms
    include_docs = version >= 3 and body.include_documentation
    results = []
    for resource in body.resources:
        result = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        try:
            _authorize(ctx, request, resource, Op.DESCRIBE_CONFIGS)
            entries = await _describe_one(ctx, resource)
        except ResourceError as e:
            result.update(error_code=e.error_code, error_message=str(e))
        else:
            result["configs"] = [_for_version(e, version, include_synonyms, include_docs) for e in entries]
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


# ---- AlterConfigs and IncrementalAlterConfigs -----------------------------------------------------
async def _alter_one(ctx: BrokerContext, resource, validate_only: bool, incremental: bool) -> None:
    zk, dynamic, manager = _served(ctx)
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == TOPIC:
        await _check_topic(ctx, name)
        entity_type, entity = "topics", name
    elif rtype == BROKER:
        entity_type, entity = "brokers", _broker_entity(ctx, name)
    elif rtype == GROUP:
        _require_name(name, "Group")
        entity_type, entity = "groups", name
    elif rtype == CLIENT_METRICS:
        _require_name(name, "Client metrics subscription")
        entity_type, entity = "client-metrics", name
    else:
        raise ResourceError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype} for altering configs")
    try:
        if incremental:
            current = await admin.fetch_entity_config(zk, entity_type, entity)
            ops = [(c.name, c.config_operation, c.value) for c in resource.configs]
            new = apply_incremental(rtype, current, ops)
        else:
            new = replace_all([(c.name, c.value) for c in resource.configs])
    except ConfigOpError as e:
        raise ResourceError(e.error_code, str(e)) from None
    try:
        if rtype == TOPIC:
            parse_topic_config(new, internal=name in INTERNAL_TOPICS)
        elif rtype == GROUP:
            group_config.validate(new, ctx.config)
        elif rtype == CLIENT_METRICS:
            client_metrics_config.parse(name, new)
        else:
            dynamic.validate(new, per_broker=entity != DEFAULT_ENTITY)
    except (ValueError, ConfigError) as e:  # GroupConfigError is a ValueError
        raise ResourceError(
            ErrorCode.INVALID_CONFIG, f"Invalid config value for resource {_resource(rtype, name)}: {e}"
        ) from None
    if validate_only:
        return
    await admin.change_entity_config(zk, entity_type, entity, new)
    await manager.process(entity_type, entity)


async def _alter(ctx: BrokerContext, request: Request, incremental: bool):
    body = request.body
    responses = []
    for resource in body.resources:
        code, message = ErrorCode.NONE, None
        try:
            _authorize(ctx, request, resource, Op.ALTER_CONFIGS)
            await _alter_one(ctx, resource, body.validate_only, incremental)
        except ResourceError as e:
            code, message = e.error_code, str(e)
        responses.append(
            {
                "error_code": code,
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}


async def alter_configs(ctx: BrokerContext, request: Request):
    return await _alter(ctx, request, incremental=False)


async def incremental_alter_configs(ctx: BrokerContext, request: Request):
    return await _alter(ctx, request, incremental=True)


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_CONFIGS: describe_configs,
    ApiKey.ALTER_CONFIGS: alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs,
}
