"""Group administration, answered by the group coordinator: ListGroups (key 16) v0-5 (v4 states
filter, v5 types filter), DescribeGroups (key 15) v0-5, DeleteGroups (key 42) v0-2. Each broker
answers for the groups it coordinates; admin clients ask every broker (ListGroups) or the
group's coordinator (the others).

Authorization (as Kafka): ListGroups shows every group with DESCRIBE on the cluster, else only the
groups the principal may DESCRIBE; DescribeGroups needs DESCRIBE and DeleteGroups DELETE on each
group (GROUP_AUTHORIZATION_FAILED). Deleting a share group deletes its share-partitions' state
at the share coordinator first."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.server import Handler
from coordinator.group import admin as group_admin
from coordinator.group.results import DescribedGroup
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


async def list_groups(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    if ctx.group_coordinator is None:
        return {"throttle_time_ms": 0, "error_code": NOT_AVAILABLE, "groups": []}
    listed = group_admin.list_groups(
        ctx.group_coordinator.manager,
        body.states_filter if version >= 4 else [],
        body.types_filter if version >= 5 else [],
    )
    groups = listed.groups
    if not cluster_allowed(ctx, request, Op.DESCRIBE):
        groups = [g for g in groups if allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, g.group_id)]
    return {"throttle_time_ms": 0, "error_code": listed.error_code, "groups": [asdict(g) for g in groups]}


async def describe_groups(ctx: BrokerContext, request: Request):
    groups = []
    for group_id in request.body.groups:
        if not allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, group_id):
            described = DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id, "")
        elif ctx.group_coordinator is None:
            described = DescribedGroup(NOT_AVAILABLE, group_id, "")
        else:
            described = group_admin.describe_group(ctx.group_coordinator.manager, group_id)
        groups.append(asdict(described))  # DescribeGroups' field names, every version's
    return {"throttle_time_ms": 0, "groups": groups}


async def delete_groups(ctx: BrokerContext, request: Request):
    results = []
    for group_id in request.body.groups_names:
        if not allowed(ctx, request, Op.DELETE, Resource.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif ctx.group_coordinator is None:
            error = NOT_AVAILABLE
        else:
            error = await _delete_share_state(ctx, group_id)
            if error == ErrorCode.NONE:
                error = await group_admin.delete_group(ctx.group_coordinator.manager, group_id)
        results.append({"group_id": group_id, "error_code": error})
    return {"throttle_time_ms": 0, "results": results}


async def _delete_share_state(ctx: BrokerContext, group_id: str) -> ErrorCode:
    """A share group's state at the share coordinator goes before its records (as Kafka)."""
    share = ctx.share_manager
    if ctx.group_coordinator is None or share is None or share.persister is None:
        return ErrorCode.NONE
    return await ctx.group_coordinator.share_offsets.delete_state(group_id, share.persister)


HANDLERS: dict[int, Handler] = {
    ApiKey.LIST_GROUPS: list_groups,
    ApiKey.DESCRIBE_GROUPS: describe_groups,
    ApiKey.DELETE_GROUPS: delete_groups,
}
