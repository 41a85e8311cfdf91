"""ListOffsets (key 2) v1-7: earliest (-2, the log start offset), latest (-1, the high watermark
for consumers), max timestamp (-3, KIP-734), or the first offset at or after a timestamp."""

from protocol.api_keys import ApiKey

API_KEY = ApiKey.LIST_OFFSETS


async def handle(ctx, request):
    return {"throttle_time_ms": 0, "topics": ctx.replica_manager.list_offsets(request.body, request.api_version)}
