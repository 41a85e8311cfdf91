"""The server-side assignors of the consumer group protocol (KIP-848's `ConsumerGroupPartitionAssignor`):
pure functions from the members' subscriptions and the subscribed topics' partition counts to a
target assignment.

Shapes: an `Assignment` maps a topic id (UUID) to a frozenset of partition numbers. The input is
`members` (member id -> `MemberSubscription`: the topic ids it subscribes to and its current target,
for stickiness) and `topics` (topic id -> number of partitions); the output maps every member id to
its new target (possibly empty). Each partition of a subscribed topic goes to exactly one member
subscribed to that topic; a topic nobody subscribes to is not assigned.

- `uniform` (Kafka's UniformAssignor, the default): balanced and sticky. A member keeps the
  partitions it had while they stay eligible; the free ones go to the eligible member with the
  fewest partitions; then partitions move from the most loaded member to an eligible one with at
  least two fewer until no such move is left, so counts among members sharing a subscription
  differ by at most one.
- `range` (Kafka's RangeAssignor, server side): per topic, its subscribers sorted by member id
  take contiguous ranges, the first `n % m` one partition more (co-partitioned topics line up).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from protocol.topic_partition import TopicIdPartition

Assignment = Mapping[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class MemberSubscription:
    topics: frozenset[uuid.UUID]
    current: Assignment


def _as_assignment(owned: dict[str, set[TopicIdPartition]], members) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    out: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
    for member_id in members:
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in owned.get(member_id, ()):
            by_topic.setdefault(topic_id, set()).add(partition)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform(members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int]) -> dict[str, dict]:
    """Balanced, sticky assignment (see the module doc)."""
    eligible: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(members):
        for topic_id in members[member_id].topics:
            if topic_id in topics:
                eligible.setdefault(topic_id, []).append(member_id)
    owned: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    owner: dict[TopicIdPartition, str] = {}
    # 1. stickiness: keep what each member had while still eligible
    for member_id in sorted(members):
        for topic_id, partitions in members[member_id].current.items():
            if member_id not in eligible.get(topic_id, ()):
                continue
            for p in partitions:
                tp = (topic_id, p)
                if p < topics[topic_id] and tp not in owner:
                    owner[tp] = member_id
                    owned[member_id].add(tp)
    # 2. the free partitions to the least loaded eligible member
    for topic_id in sorted(eligible):
        for p in range(topics[topic_id]):
            tp = (topic_id, p)
            if tp not in owner:
                to = min(eligible[topic_id], key=lambda m: (len(owned[m]), m))
                owner[tp] = to
                owned[to].add(tp)
    # 3. balance: move from the most loaded to an eligible member with at least two fewer
    moved = True
    while moved:
        moved = False
        for member_id in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            load = len(owned[member_id])
            for tp in sorted(owned[member_id], reverse=True):
                candidates = [m for m in eligible[tp[0]] if len(owned[m]) <= load - 2]
                if candidates:
                    to = min(candidates, key=lambda m: (len(owned[m]), m))
                    owned[member_id].discard(tp)
                    owned[to].add(tp)
                    moved = True
                    break
            if moved:
                break
    return _as_assignment(owned, members)


def range_(members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, int]) -> dict[str, dict]:
    """Contiguous ranges per topic (see the module doc)."""
    owned: dict[str, set[TopicIdPartition]] = {m: set() for m in members}
    for topic_id in sorted(topics):
        subscribers = sorted(m for m, s in members.items() if topic_id in s.topics)
        if not subscribers:
            continue
        quota, extra = divmod(topics[topic_id], len(subscribers))
        start = 0
        for i, member_id in enumerate(subscribers):
            count = quota + (1 if i < extra else 0)
            owned[member_id].update((topic_id, p) for p in range(start, start + count))
            start += count
    return _as_assignment(owned, members)


#: assignor name (as `group.consumer.assignors` and ConsumerGroupHeartbeat's ServerAssignor name it)
ASSIGNORS: dict[str, Callable[..., dict[str, dict]]] = {"uniform": uniform, "range": range_}

#: Kafka's class names for the same assignors (accepted in `group.consumer.assignors`)
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
    "org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.api.assignor.RangeAssignor": "range",
}
