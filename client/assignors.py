"""Partition assignors a group leader runs (the consumer protocol's "range" and
"cooperative-sticky", as Kafka's RangeAssignor and CooperativeStickyAssignor decide; KIP-429).

Both take the members' subscriptions {member id: Subscription} and the partitions of every
subscribed topic {topic: [partition ids]}, and return {member id: {topic: [partition ids]}}.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Subscription:
    topics: list[str]
    owned: dict[str, list[int]] = field(default_factory=dict)  # what the member holds now (v1+)


def range_assign(members: dict[str, Subscription], partitions: dict[str, list[int]]) -> dict[str, dict[str, list[int]]]:
    """Per topic, its subscribers in member id order each take a contiguous range, the first ones
    one partition more when it does not divide evenly."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for topic in sorted({t for s in members.values() for t in s.topics}):
        subscribers = sorted(m for m, s in members.items() if topic in s.topics)
        parts = sorted(partitions.get(topic, []))
        per, extra = divmod(len(parts), len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic] = parts[start : start + n]
            start += n
    return out


def cooperative_sticky_assign(
    members: dict[str, Subscription], partitions: dict[str, list[int]]
) -> dict[str, dict[str, list[int]]]:
    """A balanced assignment that keeps every member's owned partitions where it can (each member
    ends with floor or ceil of its share of the partitions it may take), and, cooperatively, leaves
    out this round every partition that moves away from a member still in the group: that member
    revokes it and rejoins, and the next rebalance hands it to its new owner."""
    eligible = {m: {(t, p) for t in s.topics for p in partitions.get(t, [])} for m, s in members.items()}
    all_tps = sorted(set().union(*eligible.values())) if eligible else []
    previous: dict[tuple[str, int], str] = {}
    for m in sorted(members):
        for t, ps in members[m].owned.items():
            for p in ps:
                if (t, p) in eligible[m] and (t, p) not in previous:  # a double claim: first wins
                    previous[(t, p)] = m
    current: dict[str, set] = {m: {tp for tp, owner in previous.items() if owner == m} for m in members}
    unassigned = [tp for tp in all_tps if tp not in previous]
    total = len(all_tps)
    quota_low, extra = divmod(total, len(members)) if members else (0, 0)
    # members over their share give up their highest partitions
    order = sorted(members, key=lambda m: (-len(current[m]), m))
    ceil_slots = extra
    for m in order:
        allowed = quota_low + (1 if ceil_slots > 0 and len(current[m]) > quota_low else 0)
        if allowed > quota_low:
            ceil_slots -= 1
        while len(current[m]) > allowed:
            tp = max(current[m])
            current[m].discard(tp)
            unassigned.append(tp)
    # the pool goes to the members with the fewest, who may take each partition
    for tp in sorted(unassigned):
        takers = [m for m in members if tp in eligible[m]]
        if takers:
            current[min(takers, key=lambda m: (len(current[m]), m))].add(tp)
    # cooperative: a partition changing owner is withheld until its old owner has revoked it
    for m in members:
        for tp in list(current[m]):
            old = previous.get(tp)
            if old is not None and old != m:
                current[m].discard(tp)
    out: dict[str, dict[str, list[int]]] = {}
    for m in members:
        topics: dict[str, list[int]] = {}
        for t, p in sorted(current[m]):
            topics.setdefault(t, []).append(p)
        out[m] = topics
    return out


ASSIGNORS = {"range": range_assign, "cooperative-sticky": cooperative_sticky_assign}
