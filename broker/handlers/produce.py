"""Produce (key 0) v3-9: append each partition's record batches on its leader.

acks=1 answers after the local append, acks=-1 once the high watermark covers the batch (or
REQUEST_TIMED_OUT after timeout_ms), acks=0 sends no response at all. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE (CRC, record count),
MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), INVALID_REQUIRED_ACKS,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND)."""

from protocol.api_keys import ApiKey

API_KEY = ApiKey.PRODUCE


async def handle(ctx, request):
    body = request.body
    # Once appended, the connection's next request may start while this one waits for the HW.
    responses = await ctx.replica_manager.append_records(
        body.acks, body.timeout_ms, body.topic_data, on_appended=request.release
    )
    if body.acks == 0:
        return None
    return {"responses": responses, "throttle_time_ms": 0}
