"""Operators' views of the group coordinator, as free functions over its state store (the same
shape as `coordinator.transaction.admin`): ListGroups (key 16), DescribeGroups (key 15) and
DeleteGroups (key 42), answered as Kafka's GroupCoordinator does."""

from __future__ import annotations

import logging

from coordinator.group import records
from coordinator.group.group_metadata import GroupState
from coordinator.group.manager import GroupMetadataManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _group_error(manager: GroupMetadataManager, group_id: str | None) -> ErrorCode:
    """INVALID_GROUP_ID for a null id (an empty one is a group of the admin APIs), then
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (Kafka's `validateGroupStatus`)."""
    return ErrorCode.INVALID_GROUP_ID if group_id is None else manager.coordinator_error(group_id)


def list_groups(manager: GroupMetadataManager, states: list[str], types: list[str]) -> dict:
    """A ListGroups (key 16) response body (without throttle time): this coordinator's groups,
    filtered by state (v4) and type (v5: all groups here are "classic");
    COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if manager.runtime.loading else ErrorCode.NONE
    wanted_states = {s.lower() for s in states}
    if types and "classic" not in {t.lower() for t in types}:
        return {"error_code": error, "groups": []}
    out = []
    for g in sorted(manager.groups.values(), key=lambda g: g.group_id):
        if g.is_in(GroupState.DEAD) or (wanted_states and g.state.value.lower() not in wanted_states):
            continue
        out.append(
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": "classic",
            }
        )
    return {"error_code": error, "groups": out}


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
    if not group.is_in(GroupState.EMPTY):
        return ErrorCode.NON_EMPTY_GROUP
    entries = [(records.offset_key(group_id, t, p), None) for t, p in group.offsets]
    entries.append((records.group_key(group_id), None))
    error, _ = await manager.append(group_id, entries)
    if error != ErrorCode.NONE:
        return error
    if manager.groups.get(group_id) is group and group.is_in(GroupState.EMPTY):
        group.transition_to(GroupState.DEAD)
        del manager.groups[group_id]
    log.info("group %s deleted", group_id)
    return ErrorCode.NONE
