"""The controller-to-broker requests (Kafka ZooKeeper mode):
LeaderAndIsr (key 4) v0-7, StopReplica (key 5) v0-4, UpdateMetadata (key 6) v0-8.
Each is fenced by controller epoch and broker epoch in the replica manager. Partitions that change
role are reported to the context's leadership listeners (the coordinators), as Kafka's
`onLeadershipChange` does.
"""

from __future__ import annotations

from broker.context import BrokerContext
from broker.metadata_cache import partition_states
from broker.partition import Partition
from broker.server import Handler
from protocol.api import Request
from protocol.api_keys import ApiKey
from zk import znodes

TopicPartition = tuple[str, int]


async def leader_and_isr(ctx: BrokerContext, request: Request) -> dict:
    await _load_topic_configs(ctx, {p["topic_name"] for p in partition_states(request.body)})

    def on_leadership_change(leaders: list[Partition], followers: list[Partition]) -> None:
        for listener in ctx.leadership_listeners:
            for partition in leaders:
                listener.on_election(partition.tp, partition.leader_epoch)
            for partition in followers:
                listener.on_resignation(partition.tp, partition.leader_epoch)

    return ctx.replica_manager.become_leader_or_follower(request.body, request.api_version, on_leadership_change)


async def _load_topic_configs(ctx: BrokerContext, topics: set[str]) -> None:
    """Per-topic overrides (/config/topics/<topic>) for topics this broker has not seen yet, so
    their logs are created with them."""
    if ctx.zk is None:
        return
    for topic in topics:
        if topic not in ctx.topic_configs:
            found = await ctx.zk.get_or_none(f"{znodes.CONFIG_TOPICS}/{topic}")
            ctx.topic_configs.set(topic, znodes.decode_topic_config(found[0]) if found else {})


async def stop_replica(ctx: BrokerContext, request: Request) -> dict:
    def on_stopped(stopped: list[TopicPartition]) -> None:
        for listener in ctx.leadership_listeners:
            for tp in stopped:
                listener.on_resignation(tp, None)

    return ctx.replica_manager.stop_replicas(request.body, request.api_version, on_stopped)


async def update_metadata(ctx: BrokerContext, request: Request) -> dict:
    return ctx.replica_manager.update_metadata(request.body)


HANDLERS: dict[int, Handler] = {
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.STOP_REPLICA: stop_replica,
    ApiKey.UPDATE_METADATA: update_metadata,
}
