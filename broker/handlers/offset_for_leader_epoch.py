"""OffsetForLeaderEpoch (key 23) v0-4: for each partition, the largest leader epoch <= the
requested one and the offset where it ended in the leader's log (the LEO for the current epoch);
followers truncate with it (KIP-101, KIP-279). Fenced by current_leader_epoch (KIP-320)."""

from broker.errors import error_code_for
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH


async def handle(ctx, request):
    out = []
    for topic in request.body.topics:
        parts = []
        for p in topic.partitions:
            entry = {"partition": p.partition, "error_code": ErrorCode.NONE, "leader_epoch": -1, "end_offset": -1}
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
