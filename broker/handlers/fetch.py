"""Fetch (key 1) v4-12: consumers read committed data (up to the high watermark), followers read
to the log end; min_bytes/max_wait_ms long polling; response max_bytes and partition_max_bytes
(the first batch is returned even when larger, KIP-74); OFFSET_OUT_OF_RANGE; leader epoch fencing
(KIP-320); incremental fetch sessions (KIP-227, v7+): `broker/fetch_sessions.py`; fetch from followers
(KIP-392, v11+): a follower answers consumers up to its HW, and a leader with the rack-aware
`replica.selector.class` names a `preferred_read_replica` in the consumer's `rack_id`.

Authorization: a follower (replica id >= 0) needs CLUSTER_ACTION on the cluster, a consumer READ
on each topic; a refused topic answers TOPIC_AUTHORIZATION_FAILED and nothing of it is read."""

from broker.authz import Op, Resource, allowed, cluster_allowed
from protocol.api_keys import ApiKey

API_KEY = ApiKey.FETCH


async def handle(ctx, request):
    may_read = None
    if ctx.authorizer is not None:
        if request.body.replica_id >= 0:
            follower_ok = cluster_allowed(ctx, request, Op.CLUSTER_ACTION)

            def may_read(topic: str) -> bool:
                return follower_ok
        else:

            def may_read(topic: str) -> bool:
                return allowed(ctx, request, Op.READ, Resource.TOPIC, topic)

    response = await ctx.replica_manager.fetch(request.body, may_read, request.api_version)
    response["throttle_time_ms"] = 0
    return response
