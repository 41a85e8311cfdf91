"""Classic-protocol members of a consumer group (KIP-848's online migration, Kafka 4's
`classicGroupJoinToConsumerGroup` and friends): `ClassicMembers`, a part of `GroupCoordinator`.

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
from collections.abc import Callable

from coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
from coordinator.group.consumer_group import MemberState
from coordinator.group.consumer_heartbeat import HeartbeatError, HeartbeatRequest, heartbeat
from coordinator.group.consumer_records import ClassicMetadata
from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.migration import (
    by_names,
    owned_partitions,
)
from coordinator.group.results import JoinGroupResult, SyncGroupResult
from protocol.consumer_protocol import decode_subscription, encode_assignment
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _join_answer(member_id: str, error: int, generation: int = -1, protocol: str | None = None) -> JoinGroupResult:
    """A classic member of a consumer group is never its leader: no member list, no leader."""
    if error != ErrorCode.NONE:
        return JoinGroupResult(error, member_id)
    return JoinGroupResult(error, member_id, generation, "consumer", protocol or "")


def _sync_answer(error: int, protocol: str | None = None, assignment: bytes = b"") -> SyncGroupResult:
    if error != ErrorCode.NONE:
        return SyncGroupResult(error, assignment=assignment)
    return SyncGroupResult(error, "consumer", protocol, assignment)


class ClassicMembers:
    """The classic APIs on consumer groups (a part of `GroupCoordinator`), over the consumer
    group coordinator whose groups they serve."""

    def __init__(self, consumer: ConsumerGroupCoordinator, spawn: Callable[..., None]) -> None:
        """`spawn(async_fn, *args)` starts a task in the coordinator's nursery (a LeaveGroup's
        removal is not awaited by its answer)."""
        self.consumer = consumer
        self.manager = consumer.manager
        self._spawn = spawn

    # ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------
    async def classic_join_consumer_group(self, holder: GroupMetadata, req) -> JoinGroupResult:
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
        async with self.consumer.lock(holder.group_id):
            group = holder.consumer
            if group is None or self.manager.groups.get(holder.group_id) is not holder:
                return _join_answer(member_id, ErrorCode.REBALANCE_IN_PROGRESS)
            existing = group.members.get(member_id)
            if existing is not None and existing.metadata.classic is None:
                return _join_answer(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            topics = self.consumer.consumer_topics()
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
                outcome = heartbeat(group, hb, topics, self.consumer.consumer_limits(), member_id)
            except HeartbeatError as e:
                return _join_answer(member_id, e.error_code)
            error = await self.consumer.write(holder.group_id, group, holder, [], outcome.records)
            if error != ErrorCode.NONE:
                return _join_answer(member_id, error)
            self._touch_classic(holder.group_id, member_id, classic)
            return _join_answer(member_id, ErrorCode.NONE, outcome.member_epoch, req.protocols[0][0])

    def classic_sync_consumer_group(
        self, holder: GroupMetadata, generation_id: int, member_id: str, protocol_name: str | None
    ) -> SyncGroupResult:
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
            self._spawn(self.consumer.fence, holder, member_id, "the member left")
        return results

    def _touch_classic(self, group_id: str, member_id: str, classic: ClassicMetadata) -> None:
        self.consumer.session_deadlines[(group_id, member_id)] = self.consumer.now_ms() + classic.session_timeout_ms
