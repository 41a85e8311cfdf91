"""The controller-to-broker requests (Kafka ZooKeeper mode): LeaderAndIsr (key 4) v2-7,
StopReplica (key 5) v1-4, UpdateMetadata (key 6) v5-8 (the versions without a broker epoch are not
served: tools/gen_schemas.py SERVED).

Before anything changes, `broker.control_plane` refuses a request off the control plane (or the
inter-broker) listener or without CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED), and one whose new
controller epoch ZooKeeper does not confirm (STALE_CONTROLLER_EPOCH). Then each is fenced by
controller epoch and broker epoch in the replica manager. A request carrying a broker epoch above
the one this broker knows makes it re-read its own registration first (the controller can see a
new registration before the broker has read back its czxid). Partitions that change role are
reported to the context's leadership listeners (the coordinators), as Kafka's
`onLeadershipChange` does.
"""

from __future__ import annotations

from typing import Any

from broker.context import BrokerContext
from broker.metadata_cache import partition_states
from broker.partition import Partition
from broker.server import Handler
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import is_valid_topic_name
from protocol.topic_partition import TopicPartition
from zk import znodes


async def _refresh_broker_epoch(ctx: BrokerContext, request: Request) -> None:
    """Re-read this broker's registration when a request names a newer broker epoch than it knows."""
    rm = ctx.replica_manager
    if ctx.zk is None:
        return
    if request.body.broker_epoch <= rm.broker_epoch:
        return
    stat = await ctx.zk.owned(znodes.broker_path(ctx.broker_id))
    if stat is not None:
        rm.broker_epoch = stat.czxid


async def _refused(ctx: BrokerContext, request: Request) -> ErrorCode | None:
    """The error that refuses a controller request (`broker.control_plane`), else None:
    CLUSTER_AUTHORIZATION_FAILED off the control plane or without CLUSTER_ACTION,
    STALE_CONTROLLER_EPOCH for a new controller epoch ZooKeeper does not confirm."""
    guard = ctx.control_plane
    if guard.off_the_control_plane(ctx, request):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    await _refresh_broker_epoch(ctx, request)
    rm = ctx.replica_manager
    if rm.broker_epoch != -1 and request.body.broker_epoch != rm.broker_epoch:
        return None  # the replica manager answers STALE_BROKER_EPOCH first, as Kafka does
    if not await guard.controller_epoch_believed(ctx.zk, rm.controller_epoch, request):
        return ErrorCode.STALE_CONTROLLER_EPOCH
    return None


def leader_and_isr_response(version: int, error: ErrorCode, results: list) -> dict:
    """A LeaderAndIsr response body of `version`: the top-level `error` and (topic partition,
    topic id, error code) per partition, grouped by topic from v5."""
    if version < 5:
        return {
            "error_code": error,
            "partition_errors": [
                {"topic_name": tp[0], "partition_index": tp[1], "error_code": code} for tp, _, code in results
            ],
        }
    topics: dict[Any, list] = {}
    for tp, topic_id, code in results:
        topics.setdefault((tp[0], topic_id), []).append({"partition_index": tp[1], "error_code": code})
    return {
        "error_code": error,
        "topics": [{"topic_id": tid, "partition_errors": errs} for (_, tid), errs in topics.items()],
    }


async def leader_and_isr(ctx: BrokerContext, request: Request) -> dict:
    refused = await _refused(ctx, request)
    if refused is not None:
        return leader_and_isr_response(request.api_version, refused, [])
    await _load_topic_configs(ctx, partition_states(request.body))

    def on_leadership_change(leaders: list[Partition], followers: list[Partition]) -> None:
        for listener in ctx.leadership_listeners:
            for partition in leaders:
                listener.on_election(partition.tp, partition.leader_epoch)
            for partition in followers:
                listener.on_resignation(partition.tp, partition.leader_epoch)

    result = await ctx.replica_manager.become_leader_or_follower(
        request.body, request.api_version, on_leadership_change
    )
    return leader_and_isr_response(request.api_version, result.error, result.partitions)


async def _load_topic_configs(ctx: BrokerContext, states: list) -> None:
    """Read /config/topics/<topic> for each topic of the LeaderAndIsr `states` that this broker
    has no overrides for, or has a partition whose log does not exist here yet: a log is created
    with the topic's current overrides, as Kafka's `fetchLogConfig` reads them on log creation.
    (Overrides held from a deleted topic of the same name, set late by a config change that
    raced the deletion, must not reach the re-created topic's logs.)"""
    if ctx.zk is None:
        return
    log_manager = ctx.replica_manager.log_manager
    stale: set[str] = set()
    for p in states:
        topic = p["topic_name"]
        if topic not in ctx.topic_configs or log_manager.get_log((topic, p["partition_index"])) is None:
            stale.add(topic)
    topics = sorted(t for t in stale if is_valid_topic_name(t))
    if not topics:
        return
    found = await ctx.zk.get_many([f"{znodes.CONFIG_TOPICS}/{topic}" for topic in topics])  # one round trip
    for topic, config in zip(topics, found):
        ctx.topic_configs.set(topic, znodes.decode_topic_config(config[0]) if config else {})
    log_manager.reconfigure(set(topics))  # the logs they have here already run with the same


async def stop_replica(ctx: BrokerContext, request: Request) -> dict:
    refused = await _refused(ctx, request)
    if refused is not None:
        return {"error_code": refused, "partition_errors": []}

    def on_stopped(stopped: list[TopicPartition]) -> None:
        for listener in ctx.leadership_listeners:
            for tp in stopped:
                listener.on_resignation(tp, None)

    result = ctx.replica_manager.stop_replicas(request.body, request.api_version, on_stopped)
    return {
        "error_code": result.error,
        "partition_errors": [
            {"topic_name": tp[0], "partition_index": tp[1], "error_code": code} for tp, _, code in result.partitions
        ],
    }


async def update_metadata(ctx: BrokerContext, request: Request) -> dict:
    refused = await _refused(ctx, request)
    if refused is not None:
        return {"error_code": refused}
    return {"error_code": ctx.replica_manager.update_metadata(request.body, request.api_version)}


HANDLERS: dict[int, Handler] = {
    ApiKey.LEADER_AND_ISR: leader_and_isr,
    ApiKey.STOP_REPLICA: stop_replica,
    ApiKey.UPDATE_METADATA: update_metadata,
}
