"""DeleteRecords (API 21, v0-2), served by the leaders of the partitions named (clients route each
partition to its leader): errors per partition are NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
OFFSET_OUT_OF_RANGE (beyond the high watermark), POLICY_VIOLATION (compact-only topic) and
REQUEST_TIMED_OUT (the replicas' low watermark did not reach the offset within `timeout_ms`).
Authorization: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED and nothing deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.delete_records import delete_records
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.DELETE_RECORDS


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    offsets = {(t.name, p.partition_index): p.offset for t in body.topics for p in t.partitions}
    may = {t: allowed(ctx, request, Op.DELETE, Resource.TOPIC, t) for t, _ in offsets}
    results = await delete_records(
        ctx.replica_manager, {tp: o for tp, o in offsets.items() if may[tp[0]]}, body.timeout_ms
    )
    results.update({tp: (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for tp in offsets if not may[tp[0]]})
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": results[(t.name, p.partition_index)][0],
                        "error_code": results[(t.name, p.partition_index)][1],
                    }
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }


HANDLERS: dict[int, Handler] = {API_KEY: handle}
