"""KIP-932's share coordinator APIs, which partition leaders (and the group coordinator) send:
InitializeShareGroupState (key 83) v0, ReadShareGroupState (84) v0, WriteShareGroupState (85)
v0-1, DeleteShareGroupState (86) v0 and ReadShareGroupStateSummary (87) v0-1, answered per
partition by this broker's share coordinator (`coordinator/share/coordinator.py`).

Only brokers send them: without CLUSTER_ACTION on the cluster every partition answers
CLUSTER_AUTHORIZATION_FAILED. An empty group id is INVALID_REQUEST; a partition whose
`__share_group_state` partition is not led here NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS
while it loads); a broker without a share coordinator (tests serving a subset of the APIs)
COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.authz import Op, cluster_allowed
from broker.server import Handler
from coordinator.share.records import SharePartitionKey, StateBatch, StateWrite
from coordinator.share.shard import StateResult
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from coordinator.share.coordinator import ShareCoordinator
    from protocol.api import Request


def _summary_fields(answer: StateResult) -> dict:
    return {
        "state_epoch": answer.state_epoch,
        "leader_epoch": answer.leader_epoch,
        "start_offset": answer.start_offset,
        "delivery_complete_count": answer.delivery_complete_count,
    }


def _read_fields(answer: StateResult) -> dict:
    return {
        "state_epoch": answer.state_epoch,
        "start_offset": answer.start_offset,
        "state_batches": [b._asdict() for b in answer.batches],
    }


async def _serve(
    ctx: BrokerContext,
    request: Request,
    operation: Callable[[ShareCoordinator, SharePartitionKey, Any], Awaitable[StateResult] | StateResult],
    fields: Callable[[StateResult], dict] = lambda answer: {},
) -> dict:
    body = request.body
    coordinator = ctx.share_coordinator
    refusal: StateResult | None = None
    if not cluster_allowed(ctx, request, Op.CLUSTER_ACTION):
        refusal = StateResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif not body.group_id:
        refusal = StateResult(ErrorCode.INVALID_REQUEST, "the group id is empty")
    elif coordinator is None:
        refusal = StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    results = []
    for topic in body.topics:
        partitions = []
        for p in topic.partitions:
            if refusal is not None or coordinator is None:  # (the second: for the type checker)
                answer = refusal or StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            else:
                found = operation(coordinator, SharePartitionKey(body.group_id, topic.topic_id, p.partition), p)
                answer = found if isinstance(found, StateResult) else await found
            partitions.append(
                {
                    "partition": p.partition,
                    "error_code": answer.error_code,
                    "error_message": answer.error_message,
                    **fields(answer),
                }
            )
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    return {"results": results}


async def initialize_share_group_state(ctx: BrokerContext, request: Request):
    return await _serve(ctx, request, lambda c, key, p: c.initialize_state(key, p.state_epoch, p.start_offset))


async def read_share_group_state(ctx: BrokerContext, request: Request):
    return await _serve(ctx, request, lambda c, key, p: c.read_state(key, p.leader_epoch), _read_fields)


async def write_share_group_state(ctx: BrokerContext, request: Request):
    def write(c, key: SharePartitionKey, p):
        batches = tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
        )
        count = getattr(p, "delivery_complete_count", -1)  # v1 (KIP-1226)
        return c.write_state(key, StateWrite(p.state_epoch, p.leader_epoch, p.start_offset, count, batches))

    return await _serve(ctx, request, write)


async def delete_share_group_state(ctx: BrokerContext, request: Request):
    return await _serve(ctx, request, lambda c, key, p: c.delete_state(key))


async def read_share_group_state_summary(ctx: BrokerContext, request: Request):
    return await _serve(ctx, request, lambda c, key, p: c.read_summary(key, p.leader_epoch), _summary_fields)


HANDLERS: dict[int, Handler] = {
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: initialize_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE: read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: delete_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: read_share_group_state_summary,
}
