"""KIP-848's consumer group APIs, answered by the group coordinator
(`coordinator.group.consumer_coordinator`): ConsumerGroupHeartbeat (key 68) v0-1 (v1 carries
SubscribedTopicRegex) and ConsumerGroupDescribe (key 69) v0. Without a coordinator (tests serving
a subset of the APIs) the answer is COORDINATOR_NOT_AVAILABLE.

Authorization (as Kafka): a heartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on every topic it subscribes to by name (TOPIC_AUTHORIZATION_FAILED); a describe needs
DESCRIBE on each group.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.server import Handler
from coordinator.group import admin as group_admin
from coordinator.group.consumer_coordinator import assignment_in, assignment_out, heartbeat_result
from coordinator.group.consumer_heartbeat import HeartbeatRequest
from coordinator.group.results import ConsumerGroupHeartbeatResult, DescribedConsumerGroup
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


async def consumer_group_heartbeat(ctx: BrokerContext, request: Request):
    return heartbeat_body(await _heartbeat(ctx, request))


def heartbeat_body(result: ConsumerGroupHeartbeatResult) -> dict:
    """A ConsumerGroupHeartbeat v0-1 or ShareGroupHeartbeat v1 response body."""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
        "assignment": assignment_out(result.assignment),
    }


def heartbeat_refusal(ctx: BrokerContext, request: Request) -> ErrorCode | None:
    """Why a consumer or share group heartbeat is refused before the coordinator sees it (READ
    on the group, DESCRIBE on each subscribed topic, a coordinator to answer), or None."""
    body = request.body
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    names = body.subscribed_topic_names
    if names is not None and not all(allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, n) for n in names):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if ctx.group_coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return None


async def _heartbeat(ctx: BrokerContext, request: Request) -> ConsumerGroupHeartbeatResult:
    body, version = request.body, request.api_version
    refusal = heartbeat_refusal(ctx, request)
    if refusal is not None or ctx.group_coordinator is None:
        return heartbeat_result(refusal or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    names = body.subscribed_topic_names
    return await ctx.group_coordinator.consumer.consumer_group_heartbeat(
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
            described = group_admin.consumer_group_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        elif ctx.group_coordinator is None:
            described = group_admin.consumer_group_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            described = group_admin.describe_consumer_group(ctx.group_coordinator, group_id)
        groups.append(described_group_body(described))
    return {"throttle_time_ms": 0, "groups": groups}


def described_group_body(group: DescribedConsumerGroup) -> dict:
    """One group of a ConsumerGroupDescribe v0 response: field names as the result's, each
    assignment in the response's `topic_partitions` struct."""
    body = asdict(group)
    for member in body["members"]:
        member["assignment"] = {"topic_partitions": member["assignment"]}
        member["target_assignment"] = {"topic_partitions": member["target_assignment"]}
    return body


HANDLERS: dict[int, Handler] = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe,
}
