"""Kafka's `SimpleAssignor` for share groups (KIP-932, as Kafka 4.1+ builds it: KAFKA-19362 and
KAFKA-19363 replaced the hash-based placement of 4.0): several members may read one partition,
and the assignment is balanced first and sticky second.

Within a pool of partitions and the members that may read them:
- each partition wants `sharing = ceil(members / partitions)` readers (1 while there are at least
  as many partitions as members);
- member i of the pool (members sorted by id) wants
  `ceil(sharing * partitions * (i + 1) / members) - ceil(sharing * partitions * i / members)`
  partitions, so the counts differ by at most one;
- a member keeps what it held, except where a partition has more readers than it wants
  (taken first from members holding more than they want) or a member holds more than it wants;
- partitions still short of readers go round-robin to members still short of partitions.

When every member subscribes to the same topics the pool is all their partitions; otherwise each
topic is a pool of its own with the members subscribed to it (Kafka's homogeneous and
heterogeneous builders). Kafka's builders iterate hash maps, so which member of several equal
candidates gets a partition may differ from Kafka's; the counts and the rules are the same.

Pure: from members' subscriptions, the topics' partition counts and the current target to the
new target (member id -> topic id -> partitions)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from coordinator.group.consumer_records import Assignment
from protocol.topic_partition import TopicIdPartition

NAME = "simple"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _balance(
    partitions: Sequence[TopicIdPartition], members: Sequence[str], held: Mapping[str, list[TopicIdPartition]]
) -> dict[str, list[TopicIdPartition]]:
    """One pool's assignment: member -> its partitions (see the module docstring for the rules)."""
    count, size = len(partitions), len(members)
    sharing = _ceil_div(size, count)
    slots = sharing * count
    wanted = {m: _ceil_div(slots * (i + 1), size) - _ceil_div(slots * i, size) for i, m in enumerate(members)}
    valid = set(partitions)
    mine = {m: [tp for tp in held.get(m, ()) if tp in valid] for m in members}
    readers: dict[TopicIdPartition, list[str]] = {tp: [] for tp in partitions}
    for m in members:
        for tp in mine[m]:
            readers[tp].append(m)

    def drop(m: str, tp: TopicIdPartition) -> None:
        mine[m].remove(tp)
        readers[tp].remove(m)

    for tp in partitions:  # over-shared partitions, from members over their count first
        while len(readers[tp]) > sharing:
            over = [m for m in readers[tp] if len(mine[m]) > wanted[m]]
            drop(over[-1] if over else readers[tp][-1], tp)
    for m in members:  # members still over their count give up their last partitions
        while len(mine[m]) > wanted[m]:
            drop(m, mine[m][-1])
    short = [m for m in members if len(mine[m]) < wanted[m]]
    turn = 0
    for tp in partitions:  # partitions short of readers, round-robin over members short of partitions
        skipped = 0
        while len(readers[tp]) < sharing and short and skipped < len(short):
            m = short[turn % len(short)]
            if tp in mine[m]:
                turn, skipped = turn + 1, skipped + 1
                continue
            mine[m].append(tp)
            readers[tp].append(m)
            skipped = 0
            if len(mine[m]) >= wanted[m]:
                short.remove(m)  # the next member slides into this turn
            else:
                turn += 1
    return mine


def assign(
    subscriptions: Mapping[str, set[uuid.UUID]],
    partition_counts: Mapping[uuid.UUID, int],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """The new target of every member in `subscriptions` (member id -> the topic ids it
    subscribes to); topics missing from `partition_counts` are not assigned."""
    members = sorted(subscriptions)
    held = {m: sorted((t, p) for t, ps in current.get(m, {}).items() for p in ps) for m in members}
    subscribed = {m: sorted(t for t in subscriptions[m] if t in partition_counts) for m in members}
    topics = sorted({t for ts in subscribed.values() for t in ts})
    pools: list[tuple[list[TopicIdPartition], list[str]]]
    if len({tuple(ts) for ts in subscribed.values()}) <= 1:
        pools = [([(t, p) for t in topics for p in range(partition_counts[t])], members)]
    else:
        pools = [
            ([(t, p) for p in range(partition_counts[t])], [m for m in members if t in subscribed[m]]) for t in topics
        ]
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for partitions, readers in pools:
        if not partitions or not readers:
            continue
        for m, tps in _balance(partitions, readers, held).items():
            for t, p in tps:
                out[m].setdefault(t, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in by_topic.items()} for m, by_topic in out.items()}
