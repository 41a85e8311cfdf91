"""Metadata (key 3) v1-12: brokers, cluster id, controller id, and topics with their partitions'
leader, leader epoch, replicas, ISR and offline replicas, all from the metadata cache (what the
controller last sent in UpdateMetadata). `topics` null asks for every topic; a topic may be named
or, from v10, given by id. Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION."""

from protocol.errors import ErrorCode


API_KEY = 3


async def handle(ctx, request):
    cache = ctx.metadata_cache
    body = request.body
    if body.topics is None:
        names = sorted(cache.partitions)
    else:
        by_id = {tid: name for name, tid in cache.topic_ids.items()}
        names = [t.name if t.name is not None else by_id.get(t.topic_id, t.topic_id) for t in body.topics]
    topics = []
    for name in names:
        if not isinstance(name, str):   # an unknown topic id
            topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": name,
                           "partitions": []})
            continue
        topics.append(cache.topic_metadata(name))
    return {"throttle_time_ms": 0, "cluster_id": ctx.cluster_id, "controller_id": cache.controller_id,
            "brokers": [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)],
            "topics": topics, "cluster_authorized_operations": -2147483648}



