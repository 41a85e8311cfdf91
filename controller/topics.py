"""Topic creation in ZooKeeper, shared by CreateTopics (on the controller) and auto-creation on
Metadata (on any broker, as Kafka's ZooKeeper mode does): validation with Kafka's error codes, the
rack-unaware assignment, then /config/topics/<topic> and /brokers/topics/<topic> (with a new topic
id). The controller's watch on /brokers/topics then creates the partitions.
"""

from __future__ import annotations

import uuid

from controller.assignment import InvalidReplicationFactor, assign_replicas
from protocol.errors import ErrorCode, KafkaError
from protocol.topic_names import InvalidTopic, validate_topic_name
from storage.config import validate_topic_config
from zk import znodes
from zk.client import NodeExistsError, ZkClient

#: the most partitions one CreateTopics or CreatePartitions request may create, over all its
#: topics (Kafka's KRaft controller bounds every user operation at MAX_RECORDS_PER_USER_OP =
#: 10,000 records and answers POLICY_VIOLATION beyond it); checked before anything is allocated
MAX_PARTITIONS_PER_REQUEST = 10_000


class TopicError(KafkaError):
    """A topic a CreateTopics / CreatePartitions / DeleteTopics cannot take, with its code
    (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, POLICY_VIOLATION, ...)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message, code)


def validate_name(name: str) -> None:
    """Kafka's topic name rule (`protocol.topic_names`): INVALID_TOPIC_EXCEPTION."""
    try:
        validate_topic_name(name)
    except InvalidTopic as e:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None


def validate_configs(configs: dict[str, str]) -> None:
    """Kafka's topic config validation (`storage.config`): INVALID_CONFIG naming the key."""
    try:
        validate_topic_config(configs)
    except ValueError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None


def check_partition_count(count: int, already: int = 0) -> None:
    """POLICY_VIOLATION when `already` partitions planned in this request plus `count` more
    exceed MAX_PARTITIONS_PER_REQUEST (before any assignment is built)."""
    if count + already > MAX_PARTITIONS_PER_REQUEST:
        raise TopicError(
            ErrorCode.POLICY_VIOLATION,
            f"Unable to perform excessively large batch operation: {count + already} partitions in one "
            f"request, at most {MAX_PARTITIONS_PER_REQUEST}.",
        )


def plan_topic(
    name: str,
    num_partitions: int,
    replication_factor: int,
    live_brokers: list[int],
    configs: dict,
    manual: dict[int, list[int]] | None = None,
) -> dict[int, list[int]]:
    """Validate and choose an assignment; raises TopicError with Kafka's code."""
    validate_name(name)
    validate_configs(configs)
    check_partition_count(len(manual) if manual else num_partitions)
    if manual:
        if sorted(manual) != list(range(len(manual))):
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
        for p, replicas in manual.items():
            if not replicas or len(set(replicas)) != len(replicas) or any(r not in live_brokers for r in replicas):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {p}: replicas {replicas}")
        return manual
    if num_partitions <= 0:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS, f"number of partitions must be larger than 0, got {num_partitions}"
        )
    try:
        return assign_replicas(num_partitions, replication_factor, live_brokers)
    except InvalidReplicationFactor as e:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None


async def write_topic(zk: ZkClient, name: str, assignment: dict[int, list[int]], configs: dict) -> uuid.UUID:
    """Write the topic's config and assignment; raises TopicError(TOPIC_ALREADY_EXISTS)."""
    if await zk.exists(znodes.topic_path(name)) is not None:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
    topic_id = uuid.uuid4()
    await zk.ensure_path(znodes.CONFIG_TOPICS)
    try:
        await zk.create(f"{znodes.CONFIG_TOPICS}/{name}", znodes.encode_topic_config(configs))
    except NodeExistsError:
        await zk.set(f"{znodes.CONFIG_TOPICS}/{name}", znodes.encode_topic_config(configs))
    try:
        await zk.create(znodes.topic_path(name), znodes.encode_topic_assignment(assignment, topic_id), makepath=True)
    except NodeExistsError:
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists") from None
    return topic_id


def plan_new_partitions(
    name: str,
    current: dict[int, list[int]],
    count: int,
    manual: list[list[int]] | None,
    live_brokers: list[int],
) -> dict[int, list[int]]:
    """CreatePartitions (Kafka's `AdminZkClient.createPartitions` checks): the assignment of the
    partitions added to a topic that has `current`, to reach `count`; `manual` gives one replica
    list per new partition, else they are placed as a new topic's would be, continuing from the
    existing partitions. Raises TopicError: INVALID_PARTITIONS (count not larger),
    INVALID_REPLICA_ASSIGNMENT (wrong number of lists, another replication factor, duplicate or
    unknown brokers), INVALID_REPLICATION_FACTOR (more replicas than live brokers)."""
    existing = len(current)
    if count < existing:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {existing} partitions, which is higher than the requested {count}.",
        )
    if count == existing:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {existing} partitions.")
    rf = len(current[min(current)]) if current else 1
    added = count - existing
    check_partition_count(added)
    if manual is not None:
        if len(manual) != added:
            raise TopicError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(manual)} assignments provided.",
            )
        for i, replicas in enumerate(manual):
            partition = existing + i
            unknown = sorted({r for r in replicas if r not in live_brokers})
            if unknown:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
                )
            if len(set(replicas)) != len(replicas):
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate brokers not allowed in replica assignment: "
                    f"{', '.join(map(str, replicas))} for partition id {partition}.",
                )
            if len(replicas) != rf:
                raise TopicError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Inconsistent replication factor between partitions, partition 0 has {rf} while "
                    f"partitions [{partition}] have replication factors [{len(replicas)}], respectively.",
                )
        return {existing + i: list(replicas) for i, replicas in enumerate(manual)}
    ids = sorted(live_brokers)
    first = current[min(current)][0] if current else ids[0] if ids else 0
    start = next((i for i, b in enumerate(ids) if b >= first), 0)
    try:
        return assign_replicas(added, rf, ids, fixed_start_index=start, start_partition_id=existing)
    except InvalidReplicationFactor as e:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None
