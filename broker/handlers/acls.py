"""ACL administration (KIP-140, KIP-290), stored as Kafka's ZooKeeper mode stores it
(`broker/acl_store.py`):
- CreateAcls (key 30, v0-3): each creation validated (`security.acl.validate`: INVALID_REQUEST with
  Kafka's reason) and written; needs ALTER on the cluster.
- DescribeAcls (key 29, v0-3): the bindings a filter matches (LITERAL, PREFIXED, ANY or MATCH),
  grouped by resource pattern; needs DESCRIBE on the cluster.
- DeleteAcls (key 31, v0-3): per filter, the bindings it matched and removed; needs ALTER on the
  cluster.
Without an authorizer every call answers SECURITY_DISABLED ("No Authorizer is configured on the
broker"), as Kafka does. v0 requests carry no pattern type: they mean LITERAL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, cluster_allowed
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate,
)

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(cls, value):
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN


def _filter(f) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        _enum(PatternType, f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        _enum(AclOperation, f.operation),
        _enum(AclPermissionType, f.permission_type),
    )


def _invalid_filter(flt: AclBindingFilter) -> str | None:
    if ResourceType.UNKNOWN in (flt.resource_type,) or PatternType.UNKNOWN == flt.pattern_type:
        return "the filter's resource or pattern type is unknown"
    if flt.operation == AclOperation.UNKNOWN or flt.permission == AclPermissionType.UNKNOWN:
        return "the filter's operation or permission is unknown"
    return None


async def create(ctx: BrokerContext, request: Request):
    creations = request.body.creations
    if ctx.acl_store is None:
        code, message = ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    elif not cluster_allowed(ctx, request, Op.ALTER):
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    else:
        results: list[dict] = []
        valid: list[AclBinding] = []
        for c in creations:
            binding = AclBinding(
                ResourcePattern(
                    _enum(ResourceType, c.resource_type), c.resource_name, _enum(PatternType, c.resource_pattern_type)
                ),
                AccessControlEntry(
                    c.principal, c.host, _enum(AclOperation, c.operation), _enum(AclPermissionType, c.permission_type)
                ),
            )
            try:
                validate(binding)
                valid.append(binding)
                results.append({"error_code": ErrorCode.NONE, "error_message": None})
            except InvalidAcl as e:
                results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
        await ctx.acl_store.add(valid)
        return {"throttle_time_ms": 0, "results": results}
    return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message} for _ in creations]}


def _pattern_groups(bindings: list[AclBinding]) -> list[dict]:
    groups: dict[ResourcePattern, list[dict]] = {}
    for b in sorted(bindings, key=repr):
        e = b.entry
        groups.setdefault(b.pattern, []).append(
            {"principal": e.principal, "host": e.host, "operation": e.operation, "permission_type": e.permission}
        )
    return [
        {"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type, "acls": acls}
        for p, acls in groups.items()
    ]


async def describe(ctx: BrokerContext, request: Request):
    def answer(code: ErrorCode, message: str | None = None, resources=()) -> dict:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": list(resources)}

    if ctx.acl_store is None:
        return answer(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not cluster_allowed(ctx, request, Op.DESCRIBE):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    flt = _filter(request.body)
    problem = _invalid_filter(flt)
    if problem is not None:
        return answer(ErrorCode.INVALID_REQUEST, problem)
    return answer(ErrorCode.NONE, None, _pattern_groups(ctx.acl_store.cache.bindings(flt)))


async def delete(ctx: BrokerContext, request: Request):
    filters = request.body.filters
    if ctx.acl_store is None or not cluster_allowed(ctx, request, Op.ALTER):
        code, message = (
            (ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
            if ctx.acl_store is None
            else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
        )
        return {
            "throttle_time_ms": 0,
            "filter_results": [{"error_code": code, "error_message": message, "matching_acls": []} for _ in filters],
        }
    results = []
    for f in filters:
        flt = _filter(f)
        problem = _invalid_filter(flt)
        if problem is not None:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": problem, "matching_acls": []})
            continue
        removed = await ctx.acl_store.remove(flt)
        matching = [
            {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": b.pattern.resource_type,
                "resource_name": b.pattern.name,
                "pattern_type": b.pattern.pattern_type,
                "principal": b.entry.principal,
                "host": b.entry.host,
                "operation": b.entry.operation,
                "permission_type": b.entry.permission,
            }
            for b in sorted(removed, key=repr)
        ]
        results.append({"error_code": ErrorCode.NONE, "error_message": None, "matching_acls": matching})
    return {"throttle_time_ms": 0, "filter_results": results}


HANDLERS: dict[int, Handler] = {
    ApiKey.CREATE_ACLS: create,
    ApiKey.DESCRIBE_ACLS: describe,
    ApiKey.DELETE_ACLS: delete,
}
