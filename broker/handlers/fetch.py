"""Fetch (key 1) v4-12: consumers read committed data (up to the high watermark), followers read
to the log end; min_bytes/max_wait_ms long polling; response max_bytes and partition_max_bytes
(the first batch is returned even when larger, KIP-74); OFFSET_OUT_OF_RANGE; leader epoch fencing
(KIP-320); incremental fetch sessions (KIP-227, v7+): `broker/fetch_sessions.py`."""

from protocol.api_keys import ApiKey

API_KEY = ApiKey.FETCH


async def handle(ctx, request):
    response = await ctx.replica_manager.fetch(request.body)
    response["throttle_time_ms"] = 0
    return response
