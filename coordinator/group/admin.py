"""Group administration (mixed into `GroupCoordinator`, whose state it shares): ListGroups (key
16), DescribeGroups (key 15) and DeleteGroups (key 42), answered as Kafka's GroupCoordinator does."""

from __future__ import annotations

import logging

from coordinator.group import records
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.manager import GroupMetadataManager
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupAdminOperations:
    """The admin third of `GroupCoordinator` (which provides what is declared here)."""

    manager: GroupMetadataManager

    def group_error(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        raise NotImplementedError

    def _live_group(self, group_id: str) -> GroupMetadata | None:
        raise NotImplementedError

    def list_groups(self, states: list[str], types: list[str]) -> tuple[ErrorCode, list[dict]]:
        """ListGroups (key 16): this coordinator's groups, filtered by state (v4) and type (v5:
        all groups here are "classic"); COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.loading else ErrorCode.NONE
        wanted_states = {s.lower() for s in states}
        if types and "classic" not in {t.lower() for t in types}:
            return error, []
        out = []
        for g in sorted(self.manager.groups.values(), key=lambda g: g.group_id):
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
        return error, out

    def describe_group(self, group_id: str) -> dict:
        """One group of a DescribeGroups (key 15) response; an unknown group is Dead, as Kafka."""
        error = self.group_error(group_id, allow_empty=True)
        group = self._live_group(group_id) if error == ErrorCode.NONE else None
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

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups (key 42) for one group: only an Empty group is deleted (its metadata and
        offsets tombstoned); NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND when unknown."""
        error = self.group_error(group_id, allow_empty=True)
        if error != ErrorCode.NONE:
            return error
        group = self._live_group(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_in(GroupState.EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        entries = [(records.offset_key(group_id, t, p), None) for t, p in group.offsets]
        entries.append((records.group_key(group_id), None))
        error, _ = await self.manager.append(group_id, entries)
        if error != ErrorCode.NONE:
            return error
        if self._live_group(group_id) is group and group.is_in(GroupState.EMPTY):
            group.transition_to(GroupState.DEAD)
            del self.manager.groups[group_id]
        log.info("group %s deleted", group_id)
        return ErrorCode.NONE
