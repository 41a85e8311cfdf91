"""Operators' views of the group coordinator, as free functions over its state store (the same
shape as `coordinator.transaction.admin`): ListGroups (key 16), DescribeGroups (key 15),
DeleteGroups (key 42) and ConsumerGroupDescribe (key 69, KIP-848), answered as Kafka's
GroupCoordinator does, for classic and consumer groups alike: a consumer group lists with type
"consumer" and its KIP-848 state (Empty, Assigning, Reconciling, Stable); DescribeGroups shows it
with protocol type "consumer" and each member's assignment in the consumer protocol's bytes."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from coordinator.group import share_assignor
from coordinator.group.consumer_heartbeat import assignor_of
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.results import (
    DescribedConsumerGroup,
    DescribedConsumerMember,
    DescribedGroup,
    DescribedMember,
    DescribedShareGroup,
    DescribedShareMember,
    DescribedTopicPartitions,
    ListedGroup,
    ListedGroups,
)
from coordinator.runtime import WriteFailed
from protocol.consumer_protocol import encode_assignment, encode_subscription
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _group_error(manager: GroupMetadataManager, group_id: str | None) -> ErrorCode:
    """INVALID_GROUP_ID for a null id (an empty one is a group of the admin APIs), then
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (Kafka's `validateGroupStatus`)."""
    return ErrorCode.INVALID_GROUP_ID if group_id is None else manager.coordinator_error(group_id)


def list_groups(manager: GroupMetadataManager, states: list[str], types: list[str]) -> ListedGroups:
    """ListGroups (key 16): this coordinator's groups, filtered by state (v4) and type (v5:
    "classic" or "consumer"); COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if manager.runtime.loading else ErrorCode.NONE
    wanted_states = {s.lower() for s in states}
    wanted_types = {t.lower() for t in types}
    out = []
    for g in sorted(manager.groups.values(), key=lambda g: g.group_id):
        state = state_of(g)
        if g.is_in(GroupState.DEAD) or (wanted_states and state.lower() not in wanted_states):
            continue
        if wanted_types and g.group_type not in wanted_types:
            continue
        protocol_type = (
            "share" if g.share is not None else "consumer" if g.consumer is not None else g.protocol_type or ""
        )
        out.append(ListedGroup(g.group_id, protocol_type, state, g.group_type))
    return ListedGroups(error, out)


def state_of(group: GroupMetadata) -> str:
    """The group's state as Kafka names it for its type."""
    if group.share is not None:
        return group.share.state
    return group.consumer.state if group.consumer is not None else group.state.value


def describe_group(manager: GroupMetadataManager, group_id: str) -> DescribedGroup:
    """One group of a DescribeGroups (key 15) answer; an unknown group is Dead, as Kafka."""
    error = _group_error(manager, group_id)
    group = manager.groups.get(group_id) if error == ErrorCode.NONE else None
    if group is None:
        return DescribedGroup(error, group_id, GroupState.DEAD.value)
    if group.share is not None:  # Kafka: not a classic or consumer group
        return DescribedGroup(ErrorCode.GROUP_ID_NOT_FOUND, group_id, GroupState.DEAD.value)
    if group.consumer is not None:
        assignor = assignor_of(group.consumer.members, manager.config.consumer_assignors)
        return _describe_consumer_group_as_classic(group, assignor)
    stable = group.is_in(GroupState.STABLE)
    return DescribedGroup(
        ErrorCode.NONE,
        group_id,
        group.state.value,
        group.protocol_type or "",
        (group.protocol_name or "") if stable else "",
        [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ],
    )


async def delete_group(manager: GroupMetadataManager, group_id: str) -> ErrorCode:
    """DeleteGroups (key 42) for one group: only an Empty group is deleted (its metadata and
    offsets tombstoned); NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when unknown."""
    error = _group_error(manager, group_id)
    if error != ErrorCode.NONE:
        return error
    group = manager.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if not group.is_in(GroupState.EMPTY) or group.has_members():
        return ErrorCode.NON_EMPTY_GROUP

    try:
        await manager.write(group_id, lambda: manager.deletion(group, list(group.offsets), whole_group=True))
    except WriteFailed as e:
        return e.error_code
    log.info("group %s deleted", group_id)
    return ErrorCode.NONE


# ---- consumer groups (KIP-848) -------------------------------------------------------------------
def _names_of(assignment, names: dict) -> dict[str, list[int]]:
    return {names.get(t, str(t)): sorted(ps) for t, ps in assignment.items() if ps}


def _describe_consumer_group_as_classic(group: GroupMetadata, assignor: str) -> DescribedGroup:
    """DescribeGroups (key 15) of a consumer group (Kafka's `ConsumerGroup.asDescribedGroup`):
    protocol type "consumer", protocol data the group's assignor, each member's subscription and
    assignment encoded as the classic consumer protocol's (topic names), so that admin clients
    that only know DescribeGroups read it as a consumer group."""
    consumer = group.consumer
    assert consumer is not None
    names = {t.topic_id: t.name for t in consumer.subscription_metadata.values()}
    return DescribedGroup(
        ErrorCode.NONE,
        group.group_id,
        consumer.state,
        "consumer",
        assignor,
        [
            DescribedMember(
                m.member_id,
                m.instance_id,
                m.metadata.client_id,
                m.metadata.client_host,
                (
                    m.metadata.classic.protocols[0][1]
                    if m.metadata.classic is not None and m.metadata.classic.protocols
                    else encode_subscription(sorted(m.metadata.subscribed_topic_names))
                ),
                encode_assignment(_names_of(m.assigned, names)),
            )
            for m in consumer.members.values()
        ],
    )


def consumer_group_error(group_id: str, error: int, message: str | None = None) -> DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe (key 69) answer that is only an error."""
    return DescribedConsumerGroup(error, message, group_id)


def describe_consumer_group(coordinator, group_id: str) -> DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe (key 69) answer: epochs, assignor, and per member
    its epoch, subscription, current and target assignment. GROUP_ID_NOT_FOUND for a group that
    is unknown or not a consumer group (as Kafka)."""
    manager: GroupMetadataManager = coordinator.manager
    error = _group_error(manager, group_id)
    if error != ErrorCode.NONE:
        return consumer_group_error(group_id, error)
    holder = manager.groups.get(group_id)
    if holder is None or holder.consumer is None:
        return consumer_group_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    group = holder.consumer
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}

    def described(assignment) -> list[DescribedTopicPartitions]:
        return described_assignment(assignment, names)

    return DescribedConsumerGroup(
        ErrorCode.NONE,
        None,
        group_id,
        group.state,
        group.group_epoch,
        group.assignment_epoch,
        coordinator.consumer.assignor_of(group),
        [
            DescribedConsumerMember(
                m.member_id,
                m.instance_id,
                m.metadata.rack_id,
                m.member_epoch,
                m.metadata.client_id,
                m.metadata.client_host,
                list(m.metadata.subscribed_topic_names),
                m.metadata.subscribed_topic_regex,
                described(m.assigned),
                described(group.target.get(m.member_id, {})),
            )
            for m in group.members.values()
        ],
    )


def described_assignment(assignment, names: Mapping[uuid.UUID, str]) -> list[DescribedTopicPartitions]:
    """An assignment (topic id -> partitions) as the describe APIs show it, topics named ("" when
    unknown)."""
    return [DescribedTopicPartitions(t, names.get(t, ""), sorted(ps)) for t, ps in sorted(assignment.items()) if ps]


# ---- share groups (KIP-932) ----------------------------------------------------------------------
def describe_share_group(
    manager: GroupMetadataManager, group_id: str, topic_names: Mapping[uuid.UUID, str]
) -> DescribedShareGroup:
    """One group of a ShareGroupDescribe (key 77) answer: epochs, the assignor ("simple"), and per
    member its epoch, subscription and assignment. GROUP_ID_NOT_FOUND for a group that is
    unknown or not a share group (as Kafka). `topic_names`: topic id -> name ("" when unknown)."""
    error = _group_error(manager, group_id)
    if error != ErrorCode.NONE:
        return DescribedShareGroup(error, None, group_id)
    holder = manager.groups.get(group_id)
    if holder is None or holder.share is None:
        return DescribedShareGroup(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", group_id)
    group = holder.share
    return DescribedShareGroup(
        ErrorCode.NONE,
        None,
        group_id,
        group.state,
        group.group_epoch,
        group.assignment_epoch,
        share_assignor.NAME,
        [
            DescribedShareMember(
                m.member_id,
                m.metadata.rack_id,
                m.member_epoch,
                m.metadata.client_id,
                m.metadata.client_host,
                list(m.metadata.subscribed_topic_names),
                described_assignment(m.assigned, topic_names),
            )
            for m in group.members.values()
        ],
    )
