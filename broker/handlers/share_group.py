"""KIP-932's share group APIs (Kafka 4.2's stable versions, which librdkafka 2.16 sends)
(the offsets' admin APIs are in `share_group_offsets.py`):
ShareGroupHeartbeat (key 76) v1 and ShareGroupDescribe (77) v1, answered by the group
coordinator (`coordinator.group.share_membership`, `coordinator.group.admin`); ShareFetch (78)
v1 and ShareAcknowledge (79) v1, answered by this broker's share-partitions
(`broker/share/share_manager.py`). Without a coordinator or share manager (tests serving a
subset of the APIs) the answer is COORDINATOR_NOT_AVAILABLE / UNKNOWN_SERVER_ERROR.

Authorization (as Kafka): a heartbeat needs READ on the group (GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED); a describe DESCRIBE on each
group; ShareFetch and ShareAcknowledge READ on the group and READ on each topic (its partitions
answer TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.handlers.consumer_group import heartbeat_body, heartbeat_refusal
from broker.server import Handler
from coordinator.group import admin as group_admin
from coordinator.group.results import DescribedShareGroup, ShareGroupHeartbeatResult
from coordinator.group.share_heartbeat import ShareHeartbeatRequest
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.share.share_manager import Acks, ShareResult
    from protocol.api import Request


async def share_group_heartbeat(ctx: BrokerContext, request: Request):
    return heartbeat_body(await _heartbeat(ctx, request))


async def _heartbeat(ctx: BrokerContext, request: Request) -> ShareGroupHeartbeatResult:
    body = request.body
    refusal = heartbeat_refusal(ctx, request)
    if refusal is not None or ctx.group_coordinator is None:
        return ShareGroupHeartbeatResult(refusal or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    names = body.subscribed_topic_names
    return await ctx.group_coordinator.share.share_group_heartbeat(
        ShareHeartbeatRequest(
            body.group_id,
            body.member_id,
            body.member_epoch,
            body.rack_id,
            tuple(names) if names is not None else None,
            request.header.client_id or "",
            request.client_host,
        )
    )


async def share_group_describe(ctx: BrokerContext, request: Request):
    names = ctx.metadata_cache.topic_names()
    groups = []
    for group_id in request.body.group_ids:
        if not allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, group_id):
            described = DescribedShareGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, None, group_id)
        elif ctx.group_coordinator is None:
            described = DescribedShareGroup(ErrorCode.COORDINATOR_NOT_AVAILABLE, None, group_id)
        else:
            described = group_admin.describe_share_group(ctx.group_coordinator.manager, group_id, names)
        groups.append(
            {
                "error_code": described.error_code,
                "error_message": described.error_message,
                "group_id": described.group_id,
                "group_state": described.group_state,
                "group_epoch": described.group_epoch,
                "assignment_epoch": described.assignment_epoch,
                "assignor_name": described.assignor_name,
                "members": [
                    {
                        "member_id": m.member_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": m.subscribed_topic_names,
                        "assignment": {
                            "topic_partitions": [
                                {"topic_id": t.topic_id, "topic_name": t.topic_name, "partitions": t.partitions}
                                for t in m.assignment
                            ]
                        },
                    }
                    for m in described.members
                ],
                "authorized_operations": described.authorized_operations,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}


def _acks(partition) -> Acks:
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in partition.acknowledgement_batches]


def _may_read(ctx: BrokerContext, request: Request):
    def may_read(topic: str) -> bool:
        return allowed(ctx, request, Op.READ, Resource.TOPIC, topic)

    return may_read


def _refusal(ctx: BrokerContext, request: Request) -> ErrorCode | None:
    """Why a ShareFetch / ShareAcknowledge is refused as a whole (READ on the group, a share
    manager to answer, a group and member id), or None."""
    body = request.body
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id or ""):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if ctx.share_manager is None:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    if not body.group_id or not body.member_id:
        return ErrorCode.INVALID_REQUEST
    return None


def _refused(error: ErrorCode, *, fetch: bool) -> dict:
    body: dict[str, object] = {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": None,
        "responses": [],
        "node_endpoints": [],
    }
    return body | {"acquisition_lock_timeout_ms": 0} if fetch else body


def _topics(body) -> dict[uuid.UUID, dict[int, Acks]]:
    """The request's partitions by topic id, each with the acknowledgements it carries."""
    topics: dict[uuid.UUID, dict[int, Acks]] = {}
    for t in body.topics:
        for p in t.partitions:
            topics.setdefault(t.topic_id, {})[p.partition_index] = _acks(p)
    return topics


async def share_fetch(ctx: BrokerContext, request: Request):
    body = request.body
    refusal = _refusal(ctx, request)
    if refusal is not None or ctx.share_manager is None:
        return _refused(refusal or ErrorCode.UNKNOWN_SERVER_ERROR, fetch=True)
    forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
    result = await ctx.share_manager.share_fetch(
        body.group_id,
        body.member_id,
        body.share_session_epoch,
        max_wait_ms=body.max_wait_ms,
        max_bytes=body.max_bytes,
        max_records=body.max_records if body.max_records > 0 else 500,
        topics=_topics(body),
        forgotten=forgotten,
        may_read=_may_read(ctx, request),
        connection_id=request.connection_id,
    )
    return _body(ctx, request, result, fetch=True)


async def share_acknowledge(ctx: BrokerContext, request: Request):
    body = request.body
    refusal = _refusal(ctx, request)
    if refusal is not None or ctx.share_manager is None:
        return _refused(refusal or ErrorCode.UNKNOWN_SERVER_ERROR, fetch=False)
    result = await ctx.share_manager.share_acknowledge(
        body.group_id, body.member_id, body.share_session_epoch, _topics(body), _may_read(ctx, request)
    )
    return _body(ctx, request, result, fetch=False)


def _body(ctx: BrokerContext, request: Request, result: ShareResult, *, fetch: bool) -> dict:
    leaders = set()
    responses = []
    for topic_id, parts in result.topics.items():
        partitions = []
        for p in parts:
            entry: dict[str, object] = {
                "partition_index": p.partition,
                "error_code": p.error_code,
                "error_message": p.error_message,
                "current_leader": {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch},
            }
            if fetch:
                entry |= {
                    "acknowledge_error_code": p.acknowledge_error_code,
                    "acknowledge_error_message": None,
                    "records": p.records,
                    "acquired_records": [
                        {
                            "first_offset": r.first_offset,
                            "last_offset": r.last_offset,
                            "delivery_count": r.delivery_count,
                        }
                        for r in p.acquired
                    ],
                }
            if p.leader_id >= 0:
                leaders.add(p.leader_id)
            partitions.append(entry)
        responses.append({"topic_id": topic_id, "partitions": partitions})
    body = {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "responses": responses,
        "node_endpoints": _endpoints(ctx, request.listener, leaders),
    }
    if fetch:
        body["acquisition_lock_timeout_ms"] = result.lock_timeout_ms
    return body


def _endpoints(ctx: BrokerContext, listener: str, broker_ids: set[int]) -> list[dict]:
    """The leaders named in the answer, on the listener the request came in on."""
    out = []
    for broker_id in sorted(broker_ids):
        broker = ctx.metadata_cache.brokers.get(broker_id)
        if broker is None:
            continue
        host, port = broker.on(listener)
        out.append({"node_id": broker_id, "host": host, "port": port, "rack": broker.rack})
    return out


HANDLERS: dict[int, Handler] = {
    ApiKey.SHARE_GROUP_HEARTBEAT: share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share_group_describe,
    ApiKey.SHARE_FETCH: share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share_acknowledge,
}
