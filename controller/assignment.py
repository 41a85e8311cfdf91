"""Replica assignment for new topics: Kafka's rack-unaware algorithm
(`AdminUtils.assignReplicasToBrokersRackUnaware`).

Partition i's first replica is broker (i + start) mod n over the sorted broker list; followers are
shifted by a per-round amount that grows every n partitions, so leaders and followers spread
evenly. `start` and the initial shift are random unless fixed (tests fix them).
"""

from __future__ import annotations

import random

from protocol.errors import ErrorCode, KafkaError


class InvalidReplicationFactor(KafkaError, ValueError):
    """The replication factor is not larger than 0 or exceeds the live brokers."""

    error_code = ErrorCode.INVALID_REPLICATION_FACTOR


def assign_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: list[int],
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """{partition: [replica broker ids]}; raises InvalidReplicationFactor when the factor is not
    in 1..len(brokers), ValueError for fewer than one partition."""
    if num_partitions <= 0:
        raise ValueError("number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise InvalidReplicationFactor("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactor(
            f"replication factor: {replication_factor} larger than available brokers: {len(brokers)}"
        )
    rng = rng or random.Random()
    ids = sorted(brokers)
    n = len(ids)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition = max(0, start_partition_id)
    out = {}
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[partition] = replicas
        partition += 1
    return out
