"""The classic group membership APIs, answered by the group coordinator
(`coordinator.group.coordinator`): JoinGroup (key 11) v0-9, SyncGroup (14) v0-5, Heartbeat (12)
v0-4, LeaveGroup (13) v0-5 (v3+ leave a batch of members, KIP-345). Without a coordinator
(tests serving a subset of the APIs) every answer is COORDINATOR_NOT_AVAILABLE.

Version details: JoinGroup v0 has no rebalance timeout (it is the session timeout, as in Kafka);
v4+ require a known member id (MEMBER_ID_REQUIRED first, KIP-394); v5+ and SyncGroup /
Heartbeat v3+ carry group.instance.id.

Authorization: each needs READ on the group, else GROUP_AUTHORIZATION_FAILED (nothing changes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.server import Handler
from coordinator.group.coordinator import JoinRequest, join_result, sync_result
from coordinator.group.results import JoinGroupResult
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def _may_read(ctx: BrokerContext, request: Request) -> bool:
    return allowed(ctx, request, Op.READ, Resource.GROUP, request.body.group_id)


async def join_group(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    if not _may_read(ctx, request):
        result = join_result(body.member_id, DENIED)
    elif ctx.group_coordinator is None:
        result = join_result(body.member_id, NOT_AVAILABLE)
    else:
        result = await ctx.group_coordinator.join_group(
            JoinRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                group_instance_id=body.group_instance_id,
                client_id=request.header.client_id or "",
                client_host=request.client_host,
                session_timeout_ms=body.session_timeout_ms,
                rebalance_timeout_ms=body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
                protocol_type=body.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
                require_known_member_id=version >= 4,
            )
        )
    return join_group_body(result)


async def sync_group(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    if not _may_read(ctx, request):
        result = sync_result(DENIED)
    elif ctx.group_coordinator is None:
        result = sync_result(NOT_AVAILABLE)
    else:
        result = await ctx.group_coordinator.sync_group(
            body.group_id,
            body.generation_id,
            body.member_id,
            body.group_instance_id,
            body.protocol_type if version >= 5 else None,
            body.protocol_name if version >= 5 else None,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


def join_group_body(result: JoinGroupResult) -> dict:
    """A JoinGroup v0-9 response body (fields a version lacks are left out when encoding)."""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "leader": result.leader,
        "skip_assignment": False,
        "member_id": result.member_id,
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
            for m in result.members
        ],
    }


async def heartbeat(ctx: BrokerContext, request: Request):
    body = request.body
    if not _may_read(ctx, request):
        error = DENIED
    elif ctx.group_coordinator is None:
        error = NOT_AVAILABLE
    else:
        error = ctx.group_coordinator.heartbeat(
            body.group_id, body.generation_id, body.member_id, body.group_instance_id
        )
    return {"throttle_time_ms": 0, "error_code": error}


async def leave_group(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    leaving: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in body.members] if version >= 3 else [(body.member_id, None)]
    )
    if not _may_read(ctx, request):
        error, results = DENIED, [DENIED] * len(leaving)
    elif ctx.group_coordinator is None:
        error, results = NOT_AVAILABLE, [NOT_AVAILABLE] * len(leaving)
    else:
        error, results = ctx.group_coordinator.leave_group(body.group_id, leaving)
    if version < 3:  # one member: its error is the response's
        return {"throttle_time_ms": 0, "error_code": error if error != ErrorCode.NONE else results[0]}
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "members": [{"member_id": m, "group_instance_id": i, "error_code": e} for (m, i), e in zip(leaving, results)],
    }


HANDLERS: dict[int, Handler] = {
    ApiKey.JOIN_GROUP: join_group,
    ApiKey.SYNC_GROUP: sync_group,
    ApiKey.HEARTBEAT: heartbeat,
    ApiKey.LEAVE_GROUP: leave_group,
}
