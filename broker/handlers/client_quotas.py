"""DescribeClientQuotas (key 48) v0-1 and AlterClientQuotas (key 49) v0-1 (KIP-546), as Kafka's
ZooKeeper mode serves them: quotas are read from and written to the entities' config znodes
(`broker.quota.entities`), and every broker applies a change through `/config/changes`.

- Entities name a user, a client id, or both (`user`, `client-id`; a null name is the default).
  IP entities, unknown or repeated entity types, and an empty entity answer INVALID_REQUEST.
- Keys: producer_byte_rate, consumer_byte_rate (whole bytes/s), request_percentage,
  controller_mutation_rate; a value must be positive. An unknown key or bad value is
  INVALID_REQUEST for that entity; `validate_only` checks without writing.
- Describe filters per entity type: EXACT name (null: the default), DEFAULT, SPECIFIED (any
  name); `strict` leaves out entities with other types too.
- Authorization: ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, cluster_allowed
from broker.quota import entities
from broker.quota.manager import DEFAULT, FETCH, PRODUCE, QUOTA_KEYS, Entity
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from zk import admin

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


EXACT, MATCH_DEFAULT, SPECIFIED = 0, 1, 2
WHOLE = {PRODUCE, FETCH}  # Kafka's LONG-typed quota keys


class _Invalid(Exception):
    pass


def _entity(entry) -> Entity:
    try:
        return entities.from_components([(e.entity_type, e.entity_name) for e in entry.entity])
    except ValueError as e:
        raise _Invalid(str(e)) from None


def _validated(ops) -> dict[str, float | None]:
    changes: dict[str, float | None] = {}
    for op in ops:
        if op.key not in QUOTA_KEYS:
            raise _Invalid(f"Invalid configuration key {op.key}")
        if op.key in changes:
            raise _Invalid(f"Duplicate quota key {op.key}")
        if op.remove:
            changes[op.key] = None
            continue
        if not op.value > 0 or op.value != op.value or op.value == float("inf"):
            raise _Invalid(f"Quota {op.key} must be positive, got {op.value}")
        if op.key in WHOLE and op.value != int(op.value):
            raise _Invalid(f"Quota {op.key} must be a whole number of bytes per second, got {op.value}")
        changes[op.key] = op.value
    return changes


def _stored(key: str, value: float) -> str:
    return str(int(value)) if key in WHOLE else repr(float(value))


async def alter(ctx: BrokerContext, request: Request):
    body = request.body
    results = []
    authorized = cluster_allowed(ctx, request, Op.ALTER_CONFIGS)
    for entry in body.entries:
        result: dict = {"error_code": ErrorCode.NONE, "error_message": None, "entity": list(entry.entity)}
        results.append(result)
        if not authorized:
            result["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            continue
        try:
            entity = _entity(entry)
            changes = _validated(entry.ops)
        except _Invalid as e:
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=str(e))
            continue
        if body.validate_only or ctx.zk is None:
            continue
        entity_type, name = entities.config_path(entity)
        config = await admin.fetch_entity_config(ctx.zk, entity_type, name)
        for key, value in changes.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = _stored(key, value)
        await admin.change_entity_config(ctx.zk, entity_type, name, config)
    return {"throttle_time_ms": 0, "entries": results}


async def _all_entities(zk) -> dict[Entity, dict[str, str]]:
    """Every user, user+client and client entity's stored quotas (those with any)."""
    out: dict[Entity, dict[str, str]] = {}
    for entity_type, name in await admin.user_and_client_nodes(zk):
        entity = entities.from_change(entity_type, name)
        config = await admin.fetch_entity_config(zk, entity_type, name)
        quotas = {k: v for k, v in config.items() if k in QUOTA_KEYS}
        if entity is not None and quotas:
            out[entity] = quotas
    return out


def _matches(entity: Entity, filters: list[tuple[str, int, str | None]], strict: bool) -> bool:
    values = {entities.USER: entity[0], entities.CLIENT_ID: entity[1]}
    for entity_type, match_type, match in filters:
        value = values.get(entity_type)
        if value is None:
            return False
        if match_type == EXACT and value != (DEFAULT if match is None else match):
            return False
        if match_type == MATCH_DEFAULT and value != DEFAULT:
            return False
        if match_type == SPECIFIED and value == DEFAULT:
            return False
    if strict:
        named = {t for t, _m, _n in filters}
        return all(v is None or t in named for t, v in values.items())
    return True


async def describe(ctx: BrokerContext, request: Request):
    body = request.body
    if not cluster_allowed(ctx, request, Op.DESCRIBE_CONFIGS):
        return _describe_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    filters = []
    seen = set()
    for c in body.components:
        if c.entity_type in seen or c.entity_type not in (entities.USER, entities.CLIENT_ID, entities.IP):
            return _describe_error(ErrorCode.INVALID_REQUEST, f"Invalid or duplicate entity type {c.entity_type}")
        if c.match_type not in (EXACT, MATCH_DEFAULT, SPECIFIED):
            return _describe_error(ErrorCode.INVALID_REQUEST, f"Unexpected match type {c.match_type}")
        seen.add(c.entity_type)
        filters.append((c.entity_type, c.match_type, c.match))
    if entities.IP in seen:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": []}
    found = await _all_entities(ctx.zk) if ctx.zk is not None else {}
    entries = [
        {
            "entity": entities.to_components(entity),
            "values": [{"key": k, "value": float(v)} for k, v in sorted(quotas.items())],
        }
        for entity, quotas in sorted(found.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))
        if _matches(entity, filters, body.strict)
    ]
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "entries": entries}


def _describe_error(code: ErrorCode, message: str) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: describe,
    ApiKey.ALTER_CLIENT_QUOTAS: alter,
}
