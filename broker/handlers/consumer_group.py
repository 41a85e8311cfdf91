"""KIP-848's consumer group APIs, answered by the group coordinator
(`coordinator.group.consumer_coordinator`): ConsumerGroupHeartbeat (key 68) v0-1 (v1 carries
SubscribedTopicRegex) and ConsumerGroupDescribe (key 69) v0. Without a coordinator (tests serving
a subset of the APIs) the answer is COORDINATOR_NOT_AVAILABLE.

Authorization (as Kafka): a heartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on every topic it subscribes to by name (TOPIC_AUTHORIZATION_FAILED); a describe needs
DESCRIBE on each group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.server import Handler
from coordinator.group import admin as group_admin
from coordinator.group.consumer_coordinator import assignment_in, heartbeat_result
from coordinator.group.consumer_heartbeat import HeartbeatRequest
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


async def consumer_group_heartbeat(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id):
        return heartbeat_result(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = body.subscribed_topic_names
    if names is not None and not all(allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, n) for n in names):
        return heartbeat_result(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if ctx.group_coordinator is None:
        return heartbeat_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return await ctx.group_coordinator.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
            server_assignor=body.server_assignor,
            owned=assignment_in(body.topic_partitions),
            client_id=request.header.client_id or "",
            client_host=request.client_host,
        )
    )


async def consumer_group_describe(ctx: BrokerContext, request: Request):
    groups = []
    for group_id in request.body.group_ids:
        if not allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, group_id):
            groups.append(group_admin.consumer_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
        elif ctx.group_coordinator is None:
            groups.append(group_admin.consumer_group_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        else:
            groups.append(group_admin.describe_consumer_group(ctx.group_coordinator, group_id))
    return {"throttle_time_ms": 0, "groups": groups}


HANDLERS: dict[int, Handler] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
}
