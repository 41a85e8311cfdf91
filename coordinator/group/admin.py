"""Operators' views of the group coordinator, as free functions over its state store (the same
shape as `coordinator.transaction.admin`): ListGroups (key 16), DescribeGroups (key 15),
DeleteGroups (key 42) and ConsumerGroupDescribe (key 69, KIP-848), answered as Kafka's
GroupCoordinator does, for classic and consumer groups alike: a consumer group lists with type
"consumer" and its KIP-848 state (Empty, Assigning, Reconciling, Stable); DescribeGroups shows it
with protocol type "consumer" and each member's assignment in the consumer protocol's bytes."""

from __future__ import annotations

import logging

from coordinator.group import consumer_records, records
from coordinator.group.consumer_coordinator import assignment_out
from coordinator.group.consumer_heartbeat import assignor_of
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.manager import GroupMetadataManager
from protocol.consumer_protocol import encode_assignment, encode_subscription
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _group_error(manager: GroupMetadataManager, group_id: str | None) -> ErrorCode:
    """INVALID_GROUP_ID for a null id (an empty one is a group of the admin APIs), then
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (Kafka's `validateGroupStatus`)."""
    return ErrorCode.INVALID_GROUP_ID if group_id is None else manager.coordinator_error(group_id)


def list_groups(manager: GroupMetadataManager, states: list[str], types: list[str]) -> dict:
    """A ListGroups (key 16) response body (without throttle time): this coordinator's groups,
    filtered by state (v4) and type (v5: "classic" or "consumer");
    COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
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
        out.append(
            {
                "group_id": g.group_id,
                "protocol_type": "consumer" if g.consumer is not None else g.protocol_type or "",
                "group_state": state,
                "group_type": g.group_type,
            }
        )
    return {"error_code": error, "groups": out}


def state_of(group: GroupMetadata) -> str:
    """The group's state as Kafka names it for its type."""
    return group.consumer.state if group.consumer is not None else group.state.value


def describe_group(manager: GroupMetadataManager, group_id: str) -> dict:
    """One group of a DescribeGroups (key 15) response; an unknown group is Dead, as Kafka."""
    error = _group_error(manager, group_id)
    group = manager.groups.get(group_id) if error == ErrorCode.NONE else None
    if group is None:
        return {
            "error_code": error,
            "group_id": group_id,
            "group_state": GroupState.DEAD.value,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": -2147483648,
        }
    if group.consumer is not None:
        assignor = assignor_of(group.consumer.members, manager.config.consumer_assignors)
        return _describe_consumer_group_as_classic(group, assignor)
    stable = group.is_in(GroupState.STABLE)
    return {
        "error_code": ErrorCode.NONE,
        "group_id": group_id,
        "group_state": group.state.value,
        "protocol_type": group.protocol_type or "",
        "protocol_data": (group.protocol_name or "") if stable else "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
        "authorized_operations": -2147483648,
    }


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
    entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group_id, t, p), None) for t, p in group.offsets]
    if group.consumer is not None:
        entries += [consumer_records.encode(r) for r in group.consumer.group_tombstones()]
    entries.append((records.group_key(group_id), None))
    error, _ = await manager.append(group_id, entries)
    if error != ErrorCode.NONE:
        return error
    if manager.groups.get(group_id) is group and group.is_in(GroupState.EMPTY) and not group.has_members():
        group.transition_to(GroupState.DEAD)
        del manager.groups[group_id]
    log.info("group %s deleted", group_id)
    return ErrorCode.NONE


# ---- consumer groups (KIP-848) -------------------------------------------------------------------
def _names_of(assignment, names: dict) -> dict[str, list[int]]:
    return {names.get(t, str(t)): sorted(ps) for t, ps in assignment.items() if ps}


def _describe_consumer_group_as_classic(group: GroupMetadata, assignor: str) -> dict:
    """DescribeGroups (key 15) of a consumer group (Kafka's `ConsumerGroup.asDescribedGroup`):
    protocol type "consumer", protocol data the group's assignor, each member's subscription and
    assignment encoded as the classic consumer protocol's (topic names), so that admin clients
    that only know DescribeGroups read it as a consumer group."""
    consumer = group.consumer
    assert consumer is not None
    names = {t.topic_id: t.name for t in consumer.subscription_metadata.values()}
    return {
        "error_code": ErrorCode.NONE,
        "group_id": group.group_id,
        "group_state": consumer.state,
        "protocol_type": "consumer",
        "protocol_data": assignor,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.metadata.client_id,
                "client_host": m.metadata.client_host,
                "member_metadata": (
                    m.metadata.classic.protocols[0][1]
                    if m.metadata.classic is not None and m.metadata.classic.protocols
                    else encode_subscription(sorted(m.metadata.subscribed_topic_names))
                ),
                "member_assignment": encode_assignment(_names_of(m.assigned, names)),
            }
            for m in consumer.members.values()
        ],
        "authorized_operations": -2147483648,
    }


def consumer_group_error(group_id: str, error: int, message: str | None = None) -> dict:
    """One group of a ConsumerGroupDescribe (key 69) response that is only an error."""
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": -2147483648,
    }


def describe_consumer_group(coordinator, group_id: str) -> dict:
    """One group of a ConsumerGroupDescribe (key 69) response: epochs, assignor, and per member
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

    def described(assignment) -> dict:
        out = assignment_out(assignment) or {"topic_partitions": []}
        for tp in out["topic_partitions"]:
            tp["topic_name"] = names.get(tp["topic_id"], "")
        return out

    assignor = coordinator.assignor_of(group)
    return {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "group_id": group_id,
        "group_state": group.state,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": assignor,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.metadata.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.metadata.client_id,
                "client_host": m.metadata.client_host,
                "subscribed_topic_names": list(m.metadata.subscribed_topic_names),
                "subscribed_topic_regex": m.metadata.subscribed_topic_regex,
                "assignment": described(m.assigned),
                "target_assignment": described(group.target.get(m.member_id, {})),
            }
            for m in group.members.values()
        ],
        "authorized_operations": -2147483648,
    }
