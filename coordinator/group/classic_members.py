"""Classic-protocol members of a consumer group (KIP-848's online migration, Kafka 4's
`classicGroupJoinToConsumerGroup` and friends), mixed into `GroupCoordinator`.

A group upgraded while some members still speak the classic protocol keeps serving them:
- JoinGroup is decided like a consumer heartbeat of that member (`consumer_heartbeat.heartbeat`
  with the member's JoinGroup subscription and the partitions its ConsumerProtocolSubscription
  says it owns) and answered at once: generation = the member epoch, protocol type "consumer",
  the member's first protocol, and no leader (the server assigns). v4+ members without an id
  are first given one (MEMBER_ID_REQUIRED), as classic groups do.
- SyncGroup answers the partitions the member may own now (the consumer protocol's Assignment).
- Heartbeat answers REBALANCE_IN_PROGRESS while the member has something to reconcile (the group
  moved past its epoch, or it waits to revoke or to receive), so it rejoins; ILLEGAL_GENERATION
  for an epoch that is not its own; UNKNOWN_MEMBER_ID for a member the group does not have.
- LeaveGroup removes the member (its records, a new group epoch); the session timeout is the
  member's own JoinGroup one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from coordinator.group import consumer_records as cr
from coordinator.group import records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_group import ConsumerGroup, MemberState
from coordinator.group.consumer_heartbeat import HeartbeatError, HeartbeatRequest, heartbeat
from coordinator.group.consumer_records import ClassicMetadata
from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.migration import (
    by_names,
    from_classic,
    may_downgrade,
    may_upgrade,
    owned_partitions,
    to_classic,
)
from protocol.consumer_protocol import decode_subscription, encode_assignment
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _join_answer(member_id: str, error: int, generation: int = -1, protocol: str | None = None) -> dict:
    return {
        "error_code": error,
        "generation_id": generation if error == ErrorCode.NONE else -1,
        "protocol_type": "consumer" if error == ErrorCode.NONE else None,
        "protocol_name": (protocol or "") if error == ErrorCode.NONE else "",
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def _sync_answer(error: int, protocol: str | None = None, assignment: bytes = b"") -> dict:
    return {
        "error_code": error,
        "protocol_type": "consumer" if error == ErrorCode.NONE else None,
        "protocol_name": protocol if error == ErrorCode.NONE else None,
        "assignment": assignment,
    }


class ClassicMemberOperations:
    """The classic APIs on consumer groups, and the conversions (`GroupCoordinator` provides
    the attributes and the consumer-group helpers used here)."""

    config: GroupCoordinatorConfig
    manager: GroupMetadataManager
    _session_deadlines: dict
    _nursery: Any

    if TYPE_CHECKING:  # provided by ConsumerGroupOperations / GroupCoordinator

        def consumer_topics(self) -> dict: ...
        def consumer_limits(self) -> Any: ...
        def now_ms(self) -> float: ...
        def wall_clock_ms(self) -> int: ...
        def _lock(self, group_id: str) -> Any: ...
        async def _write(self, group_id, group, holder, conversion, changes) -> ErrorCode: ...
        async def _fence(self, holder: GroupMetadata, member_id: str, reason: str) -> None: ...
        def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None: ...

    # ---- conversions -------------------------------------------------------------------------
    def upgrade_records(self, holder: GroupMetadata) -> tuple[ConsumerGroup | None, list]:
        """A classic group with members that a consumer-protocol member joins: the consumer
        group it becomes and the records that make it so (its classic record deleted), or
        (None, []) when the policy or the group does not allow it."""
        if not may_upgrade(self.config.consumer_migration_policy) or holder.protocol_type != "consumer":
            return None, []
        if len(holder.members) >= self.config.consumer_max_size:
            return None, []
        changes = from_classic(holder, self.consumer_topics())
        group = ConsumerGroup(holder.group_id)
        for r in changes:
            group.replay(r)
        entries = [(records.group_key(holder.group_id), None)] + [cr.encode(r) for r in changes]
        return group, entries

    def downgrades(self, holder: GroupMetadata, leaving: str) -> bool:
        """Whether `leaving` is the last consumer-protocol member of a group whose other
        members are classic ones, and the policy lets the group become classic again."""
        group = holder.consumer
        if group is None or leaving not in group.members or not may_downgrade(self.config.consumer_migration_policy):
            return False
        others = [m for mid, m in group.members.items() if mid != leaving]
        return bool(others) and all(m.metadata.classic is not None for m in others)

    async def downgrade(self, holder: GroupMetadata, leaving: str) -> ErrorCode:
        """Convert the group to a classic one without `leaving` (the caller holds the group's
        lock and checked `downgrades`), then rebalance it; NONE, or the append's error (nothing
        changed), or NOT_COORDINATOR when the partition moved meanwhile, or
        INCONSISTENT_GROUP_PROTOCOL when the members share no protocol (nothing is written; the
        leave proceeds as usual then)."""
        group = holder.consumer
        assert group is not None
        classic = to_classic(group, leaving, self.now_ms(), self.wall_clock_ms())
        if classic is None:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        entries = [cr.encode(r) for r in group.group_tombstones()]
        entries.append((records.group_key(holder.group_id), records.group_value(classic.stored())))
        error, _ = await self.manager.append(holder.group_id, entries, group_metadata=True)
        if error != ErrorCode.NONE:
            return error
        if self.manager.groups.get(holder.group_id) is not holder:
            return ErrorCode.NOT_COORDINATOR
        holder.consumer = None
        holder.members, holder.static_members = classic.members, classic.static_members
        holder.generation_id, holder.protocol_type = classic.generation_id, classic.protocol_type
        holder.protocol_name, holder.leader_id = classic.protocol_name, classic.leader_id
        holder.state, holder.current_state_timestamp_ms = classic.state, classic.current_state_timestamp_ms
        holder.converted_epochs = classic.converted_epochs
        for key in [k for k in self._session_deadlines if k[0] == holder.group_id]:
            del self._session_deadlines[key]
        log.info(
            "consumer group %s converted to a classic group (generation %d)", holder.group_id, holder.generation_id
        )
        self._prepare_rebalance(holder, "converted from a consumer group")
        return ErrorCode.NONE

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------
    async def classic_join_consumer_group(self, holder: GroupMetadata, req) -> dict:
        """JoinGroup (key 11) of a classic member of a consumer group (see the module doc)."""
        if req.protocol_type != "consumer" or not req.protocols:
            return _join_answer(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id and req.require_known_member_id and req.group_instance_id is None:
            return _join_answer(GroupMetadata.generate_member_id(req.client_id), ErrorCode.MEMBER_ID_REQUIRED)
        member_id = req.member_id or GroupMetadata.generate_member_id(req.client_id, req.group_instance_id)
        classic = ClassicMetadata(req.session_timeout_ms, tuple(req.protocols))
        try:
            topics_subscribed, _ = decode_subscription(req.protocols[0][1])
        except (ValueError, IndexError):
            return _join_answer(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        async with self._lock(holder.group_id):
            group = holder.consumer
            if group is None or self.manager.groups.get(holder.group_id) is not holder:
                return _join_answer(member_id, ErrorCode.REBALANCE_IN_PROGRESS)
            existing = group.members.get(member_id)
            if existing is not None and existing.metadata.classic is None:
                return _join_answer(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            topics = self.consumer_topics()
            hb = HeartbeatRequest(
                group_id=holder.group_id,
                member_id=member_id,
                member_epoch=0 if existing is None or existing.member_epoch < 0 else existing.member_epoch,
                instance_id=req.group_instance_id,
                rebalance_timeout_ms=req.rebalance_timeout_ms,
                subscribed_topic_names=tuple(topics_subscribed),
                owned={} if existing is None else owned_partitions(classic, topics),
                client_id=req.client_id,
                client_host=req.client_host,
                classic=classic,
            )
            try:
                outcome = heartbeat(group, hb, topics, self.consumer_limits(), member_id)
            except HeartbeatError as e:
                return _join_answer(member_id, e.error)
            error = await self._write(holder.group_id, group, holder, [], outcome.records)
            if error != ErrorCode.NONE:
                return _join_answer(member_id, error)
            self._touch_classic(holder.group_id, member_id, classic)
            return _join_answer(member_id, ErrorCode.NONE, outcome.member_epoch, req.protocols[0][0])

    def classic_sync_consumer_group(
        self, holder: GroupMetadata, generation_id: int, member_id: str, protocol_name: str | None
    ) -> dict:
        """SyncGroup (key 14) of a classic member of a consumer group."""
        group = holder.consumer
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.metadata.classic is None:
            return _sync_answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != member.member_epoch:
            return _sync_answer(ErrorCode.ILLEGAL_GENERATION)
        protocols = [n for n, _ in member.metadata.classic.protocols]
        if protocol_name is not None and protocol_name not in protocols:
            return _sync_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self._touch_classic(holder.group_id, member_id, member.metadata.classic)
        names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
        return _sync_answer(
            ErrorCode.NONE, protocol_name or protocols[0], encode_assignment(by_names(member.assigned, names))
        )

    def classic_heartbeat_consumer_group(self, holder: GroupMetadata, generation_id: int, member_id: str) -> ErrorCode:
        """Heartbeat (key 12) of a classic member of a consumer group."""
        group = holder.consumer
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None or member.metadata.classic is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch_classic(holder.group_id, member_id, member.metadata.classic)
        if member.state != MemberState.STABLE or group.group_epoch > member.member_epoch:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave_consumer_group(
        self, holder: GroupMetadata, leaving: list[tuple[str, str | None]]
    ) -> list[ErrorCode]:
        """LeaveGroup (key 13) on a consumer group: each known member is removed (in the
        coordinator's nursery: the answer does not wait for the append)."""
        group = holder.consumer
        results = []
        for member_id, instance_id in leaving:
            if instance_id is not None and group is not None:
                current = group.static_members.get(instance_id)
                if current is None or (member_id and member_id != current):
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID if current is None else ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if group is None or member_id not in group.members:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            results.append(ErrorCode.NONE)
            self._nursery.start_soon(self._fence, holder, member_id, "the member left")
        return results

    def _touch_classic(self, group_id: str, member_id: str, classic: ClassicMetadata) -> None:
        self._session_deadlines[(group_id, member_id)] = self.now_ms() + classic.session_timeout_ms
