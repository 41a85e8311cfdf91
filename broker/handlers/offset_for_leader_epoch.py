"""OffsetForLeaderEpoch (key 23) v0-4: for each partition, the largest leader epoch <= the
requested one and the offset where it ended in the leader's log (the LEO for the current epoch);
followers truncate with it (KIP-101, KIP-279). Fenced by current_leader_epoch (KIP-320).
Authorization: a follower (replica id >= 0) needs CLUSTER_ACTION, a client DESCRIBE on the topic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.errors import error_code_for
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH


async def handle(ctx: BrokerContext, request: Request):
    out = []
    follower = request.api_version >= 3 and request.body.replica_id >= 0
    for topic in request.body.topics:
        parts = []
        if follower:
            ok = cluster_allowed(ctx, request, Op.CLUSTER_ACTION)
        else:
            ok = allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, topic.topic)
        for p in topic.partitions:
            entry = {"partition": p.partition, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
            if not ok:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                parts.append(entry)
                continue
            try:
                partition = ctx.replica_manager.get_partition(topic.topic, p.partition)
                partition.require_leader(p.current_leader_epoch)
                epoch, end = partition.log.epoch_cache.end_offset_for(p.leader_epoch, partition.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except Exception as e:
                entry["error_code"] = error_code_for(e)
            parts.append(entry)
        out.append({"topic": topic.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": out}
