"""Kafka's `SimpleAssignor` for share groups (KIP-932): in a share group several members may read
the same partition, so an assignment only adds readers.

1. Each member is placed on one partition of what it subscribes to: the partition at
   `abs(javaHash(member id)) % partitions` of its subscribed partitions in order.
2. Partitions no member got in step 1 and none held before go round-robin over the members
   subscribed to their topic.
3. What a member held before stays with it while it still subscribes to that topic.

Pure: from members' subscriptions, the topics' partition counts and the current target to the
new target (member id -> topic id -> partitions)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from coordinator.group.consumer_records import Assignment
from coordinator.record_codec import java_string_hash
from protocol.topic_partition import TopicIdPartition

NAME = "simple"


def _index(member_id: str, size: int) -> int:
    """Java's `Math.abs(memberId.hashCode() % size)` (Java's remainder keeps the sign)."""
    return abs(java_string_hash(member_id)) % size


def assign(
    subscriptions: Mapping[str, set[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The new target of every member in `subscriptions` (member id -> the topic ids it
    subscribes to); topics missing from `partition_counts` are not assigned."""
    wanted: dict[str, list[TopicIdPartition]] = {
        m: [(t, p) for t in sorted(topics) if t in partition_counts for p in range(partition_counts[t])]
        for m, topics in sorted(subscriptions.items())
    }
    held: dict[TopicIdPartition, list[str]] = {}
    for member, assignment in current.items():
        for t, ps in assignment.items():
            for p in ps:
                held.setdefault((t, p), []).append(member)
    placed: dict[TopicIdPartition, list[str]] = {}
    for member, targets in wanted.items():
        if targets:
            placed.setdefault(targets[_index(member, len(targets))], []).append(member)
    readers: dict[uuid.UUID, list[str]] = {}
    for member, targets in wanted.items():
        for t in dict.fromkeys(t for t, _ in targets):
            readers.setdefault(t, []).append(member)
    unplaced: dict[uuid.UUID, list[TopicIdPartition]] = {}
    for targets in wanted.values():
        for tp in targets:
            if tp not in placed and tp not in held and tp not in unplaced.get(tp[0], []):
                unplaced.setdefault(tp[0], []).append(tp)
    for topic, tps in unplaced.items():
        members = readers[topic]
        for i, tp in enumerate(tps):
            placed.setdefault(tp, []).append(members[i % len(members)])
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in subscriptions}
    for (t, p), members in held.items():
        for m in members:
            if m in subscriptions and t in subscriptions[m] and t in partition_counts and p < partition_counts[t]:
                out[m].setdefault(t, set()).add(p)
    for (t, p), members in placed.items():
        for m in members:
            out[m].setdefault(t, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in by_topic.items()} for m, by_topic in out.items()}
