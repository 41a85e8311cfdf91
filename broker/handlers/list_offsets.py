"""ListOffsets (key 2) v1-7: earliest (-2, the log start offset), latest (-1, the high watermark
for consumers), max timestamp (-3, KIP-734), or the first offset at or after a timestamp.
Authorization: DESCRIBE on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.read_results import ListedOffset
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.LIST_OFFSETS


async def handle(ctx: BrokerContext, request: Request):
    version = request.api_version
    topics = []
    for name, listed in ctx.replica_manager.list_offsets(request.body, version):
        if not allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, name):
            listed = [ListedOffset(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in listed]
        topics.append({"name": name, "partitions": [partition_body(p, version) for p in listed]})
    return {"throttle_time_ms": 0, "topics": topics}


def partition_body(p: ListedOffset, version: int) -> dict:
    return {
        "partition_index": p.partition,
        "error_code": p.error_code,
        "timestamp": p.timestamp,
        "offset": p.offset,
        "leader_epoch": p.leader_epoch if version >= 4 else -1,  # v4+ (and not ignorable)
    }
