"""The controller-to-broker requests (Kafka ZooKeeper mode):
LeaderAndIsr (key 4) v0-7, StopReplica (key 5) v0-4, UpdateMetadata (key 6) v0-8.
Each is fenced by controller epoch and broker epoch in the replica manager."""

from broker import zkdata
from broker.metadata_cache import partition_states


async def leader_and_isr(ctx, request):
    await _load_topic_configs(ctx, {p["topic_name"] for p in partition_states(request.body)})
    return ctx.replica_manager.become_leader_or_follower(request.body, request.api_version)


async def _load_topic_configs(ctx, topics: set[str]) -> None:
    """Per-topic overrides (/config/topics/<topic>) for topics this broker has not seen yet, so
    their logs are created with them."""
    if ctx.zk is None:
        return
    for topic in topics:
        if topic not in ctx.topic_configs:
            found = await ctx.zk.get_or_none(f"{zkdata.CONFIG_TOPICS}/{topic}")
            ctx.topic_configs.set(topic, zkdata.decode_topic_config(found[0]) if found else {})


async def stop_replica(ctx, request):
    return ctx.replica_manager.stop_replicas(request.body, request.api_version)


async def update_metadata(ctx, request):
    return ctx.replica_manager.update_metadata(request.body)


HANDLERS = {4: leader_and_isr, 5: stop_replica, 6: update_metadata}
