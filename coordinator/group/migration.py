"""Online migration between classic and consumer groups (KIP-848, Kafka 4's
`group.consumer.migration.policy`), as pure conversions.

- Upgrade (`upgrade` or `bidirectional`): a consumer-protocol member joins a classic group of the
  consumer protocol type that has members. `from_classic` gives the records of a consumer group
  holding the same members: each keeps its classic identity (session timeout and JoinGroup
  protocols in record 5's ClassicMemberMetadata), its subscription (from its JoinGroup metadata)
  and, at member epoch = the classic generation, the partitions the classic leader gave it, which
  are also its target; group and assignment epochs are the generation. The classic members go on
  with JoinGroup / SyncGroup / Heartbeat, answered by the consumer group
  (`classic_members.py`).
- Downgrade (`downgrade` or `bidirectional`): when the last consumer-protocol member leaves (or
  is removed from) a group whose other members all speak the classic protocol, `to_classic`
  gives the classic group they form instead of the leave's own records: generation = the group
  epoch, a protocol every member supports, each member's current partitions as its assignment,
  and each member's commits of its own member epoch accepted until the next generation (they
  still own those partitions); the coordinator then starts a rebalance so they rejoin.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from coordinator.group import consumer_records as cr
from coordinator.group.consumer_group import ConsumerGroup, MemberState
from coordinator.group.consumer_records import (
    Assignment,
    ClassicMetadata,
    ConsumerRecord,
    CurrentAssignment,
    MemberMetadata,
    TopicMetadata,
)
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.group_metadata import MemberMetadata as ClassicMember
from protocol.consumer_protocol import decode_assignment, decode_subscription, encode_assignment


def may_upgrade(policy: str) -> bool:
    return policy in ("upgrade", "bidirectional")


def may_downgrade(policy: str) -> bool:
    return policy in ("downgrade", "bidirectional")


def _safe_subscription(data: bytes) -> tuple[list[str], dict[str, list[int]]]:
    try:
        return decode_subscription(data)
    except (ValueError, IndexError):
        return [], {}


def _safe_assignment(data: bytes) -> dict[str, list[int]]:
    try:
        return decode_assignment(data) if data else {}
    except (ValueError, IndexError):
        return {}


def by_ids(partitions: Mapping[str, list[int]], topics: Mapping[str, TopicMetadata]) -> Assignment:
    """Topic names -> ids (partitions of topics the cluster no longer has are dropped)."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for name, ps in partitions.items():
        topic = topics.get(name)
        if topic is not None:
            valid = frozenset(p for p in ps if 0 <= p < topic.num_partitions)
            if valid:
                out[topic.topic_id] = out.get(topic.topic_id, frozenset()) | valid
    return out


def by_names(assignment: Assignment, names: Mapping[uuid.UUID, str]) -> dict[str, list[int]]:
    return {names[t]: sorted(ps) for t, ps in assignment.items() if ps and t in names}


def classic_metadata_of(member: ClassicMember) -> MemberMetadata:
    """A classic member's subscription and identity as a consumer group holds it."""
    first = member.protocols[0][1] if member.protocols else b""
    topics, _ = _safe_subscription(first)
    return MemberMetadata(
        instance_id=member.group_instance_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(set(topics))),
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        classic=ClassicMetadata(member.session_timeout_ms, tuple(member.protocols)),
    )


def owned_partitions(classic: ClassicMetadata, topics: Mapping[str, TopicMetadata]) -> Assignment:
    """The partitions a classic member says it owns (ConsumerProtocolSubscription v1+'s owned
    partitions; none for v0, whose eager clients revoked everything before rejoining)."""
    if not classic.protocols:
        return {}
    _, owned = _safe_subscription(classic.protocols[0][1])
    return by_ids(owned, topics)


def from_classic(group: GroupMetadata, topics: Mapping[str, TopicMetadata]) -> list[ConsumerRecord]:
    """The records of the consumer group a classic group converts to (see the module doc)."""
    gid, epoch = group.group_id, group.generation_id
    records: list[ConsumerRecord] = []
    subscribed: set[str] = set()
    for m in group.members.values():
        metadata = classic_metadata_of(m)
        subscribed |= {n for n in metadata.subscribed_topic_names if n in topics}
        assigned = by_ids(_safe_assignment(m.assignment), topics)
        records += [
            ConsumerRecord(cr.MEMBER_METADATA, gid, m.member_id, metadata),
            ConsumerRecord(cr.TARGET_ASSIGNMENT_MEMBER, gid, m.member_id, assigned),
            ConsumerRecord(
                cr.CURRENT_ASSIGNMENT,
                gid,
                m.member_id,
                CurrentAssignment(epoch, epoch, int(MemberState.STABLE), assigned, {}),
            ),
        ]
    records += [
        ConsumerRecord(cr.SUBSCRIPTION_METADATA, gid, value={n: topics[n] for n in subscribed}),
        ConsumerRecord(cr.GROUP_EPOCH, gid, value=epoch),
        ConsumerRecord(cr.TARGET_ASSIGNMENT_METADATA, gid, value=epoch),
    ]
    return records


def common_protocol(group: ConsumerGroup, leaving: str | None = None) -> str | None:
    """A protocol every (classic) member but `leaving` supports, in the first member's order."""
    members = [m.metadata.classic for mid, m in group.members.items() if mid != leaving]
    if not members or any(c is None for c in members):
        return None
    supported = [{n for n, _ in c.protocols} for c in members if c is not None]
    first = members[0]
    assert first is not None
    return next((n for n, _ in first.protocols if all(n in s for s in supported)), None)


def to_classic(group: ConsumerGroup, leaving: str, now_ms: float, wall_clock_ms: int) -> GroupMetadata | None:
    """The classic group the members of a consumer group but `leaving` (the last member of the
    consumer protocol) convert to, or None when they are not all classic members sharing a
    protocol (see the module doc)."""
    protocol = common_protocol(group, leaving)
    if protocol is None:
        return None
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
    out = GroupMetadata(group.group_id, state=GroupState.STABLE)
    out.generation_id = group.group_epoch
    out.protocol_type = "consumer"
    out.protocol_name = protocol
    for m in group.members.values():
        classic = m.metadata.classic
        if m.member_id == leaving or classic is None:
            continue
        out.members[m.member_id] = ClassicMember(
            m.member_id,
            m.instance_id,
            m.metadata.client_id,
            m.metadata.client_host,
            m.metadata.rebalance_timeout_ms,
            classic.session_timeout_ms,
            "consumer",
            list(classic.protocols),
            encode_assignment(by_names(m.assigned, names)),
            heartbeat_deadline_ms=now_ms + classic.session_timeout_ms,
        )
        if m.instance_id is not None:
            out.static_members[m.instance_id] = m.member_id
        out.converted_epochs[m.member_id] = m.member_epoch
    out.leader_id = next(iter(out.members), None)
    out.current_state_timestamp_ms = wall_clock_ms
    return out
