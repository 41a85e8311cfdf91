"""FindCoordinator (key 10) v0-5: where a group's coordinator is (key type 0), one key (v0-3) or
a batch of keys (v4+, KIP-699). The coordinator of a group is the leader of its
`__consumer_offsets` partition. The topic is created on first need (as Kafka's
`KafkaApis.getOrCreateInternalTopic`): with `offsets.topic.num.partitions`,
`offsets.topic.replication.factor`, `offsets.topic.segment.bytes` and `cleanup.policy=compact`;
while fewer brokers are alive than that replication factor, or while the partition has no leader,
the answer is COORDINATOR_NOT_AVAILABLE. Transaction coordinators (key type 1) come with
transactions: until then COORDINATOR_NOT_AVAILABLE. Another key type is INVALID_REQUEST.
"""

import logging

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import GROUP_METADATA_TOPIC

API_KEY = ApiKey.FIND_COORDINATOR
GROUP, TRANSACTION = 0, 1
log = logging.getLogger(__name__)


async def _create_offsets_topic(ctx) -> None:
    from controller.topics import TopicError, plan_topic, write_topic

    coordinator = ctx.group_coordinator
    config = coordinator.config
    live = sorted(ctx.metadata_cache.brokers)
    if len(live) < config.offsets_topic_replication_factor:
        log.info(
            "%s needs %d live brokers (offsets.topic.replication.factor), %d are alive",
            GROUP_METADATA_TOPIC,
            config.offsets_topic_replication_factor,
            len(live),
        )
        return
    configs = {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": str(config.offsets_topic_segment_bytes),
    }
    try:
        assignment = plan_topic(
            GROUP_METADATA_TOPIC, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor, live, {}
        )
        await write_topic(ctx.zk, GROUP_METADATA_TOPIC, assignment, configs)
        log.info("created %s with %d partitions", GROUP_METADATA_TOPIC, len(assignment))
    except TopicError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("could not create %s: %s", GROUP_METADATA_TOPIC, e)


async def find(ctx, key_type: int, key: str) -> dict:
    """One coordinator answer: key, node_id, host, port, error_code, error_message."""

    def error(code: ErrorCode, message: str | None = None) -> dict:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}

    if key_type == TRANSACTION:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported yet")
    if key_type != GROUP:
        return error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if ctx.group_coordinator is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    cache = ctx.metadata_cache
    partition = ctx.group_coordinator.manager.partition_for(key)
    if GROUP_METADATA_TOPIC not in cache.partitions:
        if ctx.zk is not None:
            await _create_offsets_topic(ctx)
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    state = cache.get_partition(GROUP_METADATA_TOPIC, partition)
    broker = cache.brokers.get(state.leader) if state is not None else None
    if broker is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return {
        "key": key,
        "node_id": broker.broker_id,
        "host": broker.host,
        "port": broker.port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


async def handle(ctx, request):
    body = request.body
    if request.api_version >= 4:
        found = [await find(ctx, body.key_type, key) for key in body.coordinator_keys]
        return {"throttle_time_ms": 0, "coordinators": found}
    one = await find(ctx, body.key_type if request.api_version >= 1 else GROUP, body.key)
    return {
        "throttle_time_ms": 0,
        "error_code": one["error_code"],
        "error_message": one["error_message"],
        "node_id": one["node_id"],
        "host": one["host"],
        "port": one["port"],
    }
