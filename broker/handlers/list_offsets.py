"""ListOffsets (key 2) v1-7: earliest (-2, the log start offset), latest (-1, the high watermark
for consumers), max timestamp (-3, KIP-734), or the first offset at or after a timestamp.
Authorization: DESCRIBE on each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.LIST_OFFSETS


async def handle(ctx: BrokerContext, request: Request):
    topics = ctx.replica_manager.list_offsets(request.body, request.api_version)
    for topic in topics:
        if not allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, topic["name"]):
            for entry in topic["partitions"]:
                entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1, offset=-1, leader_epoch=-1)
    return {"throttle_time_ms": 0, "topics": topics}
