"""The group coordinator's trio shell (Kafka's `GroupCoordinator`, classic protocol): JoinGroup,
SyncGroup, Heartbeat, LeaveGroup over the pure `GroupMetadata` and the log-backed
`GroupMetadataManager`; offsets are in `offsets.py`, ListGroups / DescribeGroups / DeleteGroups in
`admin.py`.

Concurrency: every change to a group happens on the trio thread between awaits, so requests for
a group are serialised without locks; the only awaits inside a request are the appends to
`__consumer_offsets` (after which the group is re-checked: same object, same generation, same
state) and a member's wait for its JoinGroup / SyncGroup answer (`Reply`).
Timers (one nursery, `run`): a rebalance task per group in PreparingRebalance (the initial delay
`group.initial.rebalance.delay.ms` for a new group, then until every member rejoined or the
largest rebalance timeout passed), the session sweep (members and pending member ids without a
heartbeat for `session.timeout.ms` are removed), offset expiry, and partition loads.
Every answer uses Kafka's error codes; which one, and when, follows Kafka 3.x's GroupCoordinator.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import trio

from coordinator.group import records
from coordinator.group.classic_members import ClassicMembers
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
from coordinator.group.group_config import GroupConfigs
from coordinator.group.group_metadata import GroupMetadata, GroupState, MemberMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.migration import may_upgrade
from coordinator.group.offsets import OffsetManager
from coordinator.group.results import JoinedMember, JoinGroupResult, SyncGroupResult
from coordinator.group.share_membership import ShareGroups
from coordinator.group.share_offsets import ShareGroupOffsets
from coordinator.group.txn_offsets import TxnOffsetManager
from coordinator.runtime import PartitionLog
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S = 0.1
T = TypeVar("T", JoinGroupResult, SyncGroupResult)


class Reply(Generic[T]):
    """One member's pending JoinGroup or SyncGroup answer."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self.value: T | None = None

    def complete(self, value: T) -> None:
        if not self._event.is_set():
            self.value = value
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        assert self.value is not None
        return self.value


@dataclass
class _Rebalance:
    """The task that ends a group's PreparingRebalance."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    member_joined: trio.Event = field(default_factory=trio.Event)  # set when a member joins or leaves


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup (key 11) as the coordinator needs it; timeouts in ms, `protocols` [(name,
    metadata)]. `require_known_member_id`: v4+ (KIP-394)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


def join_result(
    member_id: str, error: ErrorCode, group: GroupMetadata | None = None, members: tuple[JoinedMember, ...] = ()
) -> JoinGroupResult:
    """A JoinGroup answer for `member_id`; the generation and protocol of `group` when `error`
    is NONE."""
    if group is None or error != ErrorCode.NONE:
        return JoinGroupResult(error, member_id)
    return JoinGroupResult(
        error,
        member_id,
        group.generation_id,
        group.protocol_type,
        group.protocol_name or "",
        group.leader_id or "",
        members,
    )


def sync_result(error: ErrorCode, group: GroupMetadata | None = None, assignment: bytes = b"") -> SyncGroupResult:
    """A SyncGroup answer; the protocol of `group` when `error` is NONE."""
    if group is None or error != ErrorCode.NONE:
        return SyncGroupResult(error, assignment=assignment)
    return SyncGroupResult(error, group.protocol_type, group.protocol_name, assignment)


class GroupCoordinator:
    """The group coordinator (Kafka's GroupCoordinator): the classic group protocol here, and
    its parts as fields over one `GroupMetadataManager`: `offsets` (OffsetCommit / OffsetFetch /
    OffsetDelete, expiry), `txn_offsets` (TxnOffsetCommit and its markers), `consumer` (KIP-848's
    consumer groups and the conversions between group types), `classic_members` (classic
    members of consumer groups) and `share` (KIP-932's share groups)."""

    def __init__(
        self,
        partition_log: PartitionLog,
        metadata_cache,
        config: GroupCoordinatorConfig,
        *,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        group_configs: GroupConfigs | None = None,
    ):
        self.config = config
        self.metadata_cache = metadata_cache
        self.wall_clock_ms = wall_clock_ms
        self.manager = GroupMetadataManager(partition_log, config, wall_clock_ms, self.now_ms, self._groups_unloaded)
        self.runtime = self.manager.runtime
        self._rebalances: dict[str, _Rebalance] = {}
        self._pending_deadlines: dict[tuple[str, str], float] = {}
        self._nursery: trio.Nursery | None = None
        self.offsets = OffsetManager(self.manager, config, metadata_cache, wall_clock_ms, self.group_error, self._touch)
        self.txn_offsets = TxnOffsetManager(self.manager, self.group_error, self.offsets.check_offsets)
        self.consumer = ConsumerGroupCoordinator(
            self.manager,
            config,
            metadata_cache,
            self.now_ms,
            wall_clock_ms,
            self._fail_waiters,
            self._prepare_rebalance,
        )
        self.classic_members = ClassicMembers(self.consumer, self._spawn)
        self.share = ShareGroups(
            self.manager,
            config,
            self.consumer.consumer_topics,
            self.now_ms,
            group_configs or GroupConfigs(config.broker_values()),
        )
        self.share_offsets = ShareGroupOffsets(self.share)

    @staticmethod
    def now_ms() -> float:
        """The coordinator's monotonic clock (trio's), for session and rebalance deadlines."""
        return trio.current_time() * 1000

    # ---- lifecycle -----------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.runtime.every(SWEEP_INTERVAL_S, self._sweep_sessions)
            self.runtime.every(SWEEP_INTERVAL_S, self.consumer.sweep)
            self.runtime.every(SWEEP_INTERVAL_S, self.share.sweep)
            self.runtime.every(self.config.offsets_retention_check_interval_ms / 1000, self.offsets.expire_now)
            await self.runtime.run(nursery)
            task_status.started()

    def _spawn(self, async_fn, *args) -> None:
        """Start a task in the coordinator's nursery."""
        assert self._nursery is not None, "the coordinator runs"
        self._nursery.start_soon(async_fn, *args)

    def on_election(self, tp: tuple[str, int], leader_epoch: int) -> None:
        """LeadershipListener: this broker now leads `tp`; the runtime loads an offsets partition."""
        self.runtime.on_election(tp, leader_epoch)

    def on_resignation(self, tp: tuple[str, int], leader_epoch: int | None) -> None:
        """LeadershipListener: this broker no longer leads `tp`; an offsets partition's groups
        are dropped (`_groups_unloaded`)."""
        self.runtime.on_resignation(tp, leader_epoch)

    def _groups_unloaded(self, groups: list[GroupMetadata]) -> None:
        """Groups a resignation removed: their waiting members are answered NOT_COORDINATOR."""
        for group in groups:
            self._fail_waiters(group, ErrorCode.NOT_COORDINATOR)
            group.transition_to(GroupState.DEAD)

    def _fail_waiters(self, group: GroupMetadata, error: ErrorCode) -> None:
        rebalance = self._rebalances.pop(group.group_id, None)
        if rebalance is not None:
            rebalance.scope.cancel()
        for m in group.members.values():
            self._answer_join(m, join_result(m.member_id, error))
            self._answer_sync(m, sync_result(error))

    @staticmethod
    def _answer_join(member: MemberMetadata, result: JoinGroupResult) -> None:
        """Answer the member's waiting JoinGroup, if one waits."""
        reply, member.join_waiter = member.join_waiter, None
        if reply is not None:
            reply.complete(result)

    @staticmethod
    def _answer_sync(member: MemberMetadata, result: SyncGroupResult) -> None:
        """Answer the member's waiting SyncGroup, if one waits."""
        reply, member.sync_waiter = member.sync_waiter, None
        if reply is not None:
            reply.complete(result)

    # ---- checks shared by the APIs -------------------------------------------------------------
    def group_error(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode:
        """Kafka's `validateGroupStatus`: INVALID_GROUP_ID (null, or empty for the membership
        APIs), then NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        if group_id is None or (group_id == "" and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        return self.manager.coordinator_error(group_id)

    def _live_group(self, group_id: str) -> GroupMetadata | None:
        return self.manager.groups.get(group_id)

    def _touch(self, member: MemberMetadata) -> None:
        member.heartbeat_deadline_ms = self.now_ms() + member.session_timeout_ms

    # ---- JoinGroup -----------------------------------------------------------------------------
    async def join_group(self, req: JoinRequest) -> JoinGroupResult:
        error = self.group_error(req.group_id)
        if error == ErrorCode.NONE and not (
            self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms
        ):
            error = ErrorCode.INVALID_SESSION_TIMEOUT
        if error != ErrorCode.NONE:
            return join_result(req.member_id, error)
        group = self._live_group(req.group_id)
        if group is None:
            if req.member_id:
                return join_result(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.manager.groups[req.group_id] = GroupMetadata(req.group_id)
        if group.is_in(GroupState.DEAD):
            return join_result(req.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.share is not None:  # Kafka: "Group g is not a classic group."
            return join_result(req.member_id, ErrorCode.GROUP_ID_NOT_FOUND)
        if group.consumer is not None:
            if group.consumer.members:  # a classic member of a consumer group (online migration)
                if not may_upgrade(self.config.consumer_migration_policy):
                    return join_result(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
                return await self.classic_members.classic_join_consumer_group(group, req)
            error = await self.consumer.consumer_group_to_classic(group)
            if error != ErrorCode.NONE:
                return join_result(req.member_id, error)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return join_result(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not req.member_id:
            return await self._join_unknown_member(group, req)
        return await self._join_known_member(group, req)

    def _accepts_new_member(self, group: GroupMetadata) -> bool:
        return group.size() < self.config.max_size

    async def _join_unknown_member(self, group: GroupMetadata, req: JoinRequest) -> JoinGroupResult:
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        old_id = group.static_member_id(req.group_instance_id)
        if old_id is not None and group.has(old_id):
            return await self._replace_static_member(group, req, old_id, new_id)
        if not self._accepts_new_member(group):
            return join_result(req.member_id, ErrorCode.GROUP_MAX_SIZE_REACHED)
        if req.require_known_member_id and req.group_instance_id is None:
            group.pending_members.add(new_id)
            self._pending_deadlines[(group.group_id, new_id)] = self.now_ms() + req.session_timeout_ms
            return join_result(new_id, ErrorCode.MEMBER_ID_REQUIRED)
        return await self._add_member_and_rebalance(group, req, new_id)

    async def _join_known_member(self, group: GroupMetadata, req: JoinRequest) -> JoinGroupResult:
        member_id = req.member_id
        if member_id in group.pending_members:
            self._pending_deadlines.pop((group.group_id, member_id), None)
            if not self._accepts_new_member(group):
                group.pending_members.discard(member_id)
                return join_result(member_id, ErrorCode.GROUP_MAX_SIZE_REACHED)
            return await self._add_member_and_rebalance(group, req, member_id)
        if group.is_static_member_fenced(member_id, req.group_instance_id):
            return join_result(member_id, ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.COMPLETING_REBALANCE) and member.matches(req.protocols):
            self._touch(member)
            return self._current_generation(group, member_id)
        if group.is_in(GroupState.STABLE) and not group.is_leader(member_id) and member.matches(req.protocols):
            self._touch(member)
            return self._current_generation(group, member_id)
        return await self._update_member_and_rebalance(group, member, req)

    def _current_generation(self, group: GroupMetadata, member_id: str) -> JoinGroupResult:
        members = self._member_list(group) if group.is_leader(member_id) else ()
        return join_result(member_id, ErrorCode.NONE, group, members)

    @staticmethod
    def _member_list(group: GroupMetadata) -> tuple[JoinedMember, ...]:
        assert group.protocol_name is not None
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
            for m in group.members.values()
        )

    async def _add_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, member_id: str
    ) -> JoinGroupResult:
        member = MemberMetadata(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
        )
        reply = member.join_waiter = Reply[JoinGroupResult]()
        self._touch(member)
        group.add(member)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        self._maybe_prepare_rebalance(group, f"adding member {member_id}")
        self._recheck_join(group)
        return await reply.wait()

    async def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, req: JoinRequest):
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        self._answer_join(
            member, join_result(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
        )  # a repeated JoinGroup
        reply = member.join_waiter = Reply[JoinGroupResult]()
        self._touch(member)
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._recheck_join(group)
        return await reply.wait()

    async def _replace_static_member(self, group: GroupMetadata, req: JoinRequest, old_id: str, new_id: str):
        """KIP-345: a static member restarted (no member id, known group.instance.id). In Stable
        with unchanged protocols it gets its old assignment without a rebalance, once the group
        record naming its new id is committed (a failed write leaves the old id in place and
        answers the error); otherwise it rejoins through a rebalance."""
        old = group.members[old_id]
        self._answer_join(old, join_result(old_id, ErrorCode.FENCED_INSTANCE_ID))
        self._answer_sync(old, sync_result(ErrorCode.FENCED_INSTANCE_ID))
        instance_id = req.group_instance_id or ""
        if not (group.is_in(GroupState.STABLE) and old.protocols == req.protocols):
            return await self._update_member_and_rebalance(group, self._replace(group, req, old_id, new_id), req)
        generation = group.generation_id

        def replay(_: int) -> None:
            if (
                self._live_group(group.group_id) is group
                and group.generation_id == generation
                and group.static_members.get(instance_id) == old_id
            ):
                self._replace(group, req, old_id, new_id)

        stored = group.stored_with_new_id(
            old_id, new_id, req.client_id, req.client_host, req.rebalance_timeout_ms, req.session_timeout_ms
        )
        error = await self.manager.write_group_records(
            group.group_id, [records.group_record(group.group_id, stored)], replay
        )
        if error != ErrorCode.NONE:
            return join_result("", error)
        if not group.has(new_id):  # the group moved on while the record was written
            return join_result(new_id, ErrorCode.REBALANCE_IN_PROGRESS)
        return self._current_generation(group, new_id)

    def _replace(self, group: GroupMetadata, req: JoinRequest, old_id: str, new_id: str) -> MemberMetadata:
        """The static member's new id and settings take over its membership."""
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = req.session_timeout_ms, req.rebalance_timeout_ms
        self._touch(member)
        return member

    # ---- rebalancing ---------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for m in group.members.values():
                self._answer_sync(m, sync_result(ErrorCode.REBALANCE_IN_PROGRESS))
        initial = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.wall_clock_ms())
        log.info("preparing to rebalance group %s in generation %d (%s)", group.group_id, group.generation_id, reason)
        rebalance = self._rebalances[group.group_id] = _Rebalance()
        assert self._nursery is not None, "the coordinator runs"
        self._nursery.start_soon(self._run_rebalance, group, rebalance, initial)

    def _recheck_join(self, group: GroupMetadata) -> None:
        rebalance = self._rebalances.get(group.group_id)
        if rebalance is not None:
            rebalance.member_joined.set()

    async def _run_rebalance(self, group: GroupMetadata, rebalance: _Rebalance, initial: bool) -> None:
        with rebalance.scope:
            rebalance_timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
            if initial and self.config.initial_rebalance_delay_ms > 0:
                # Kafka's InitialDelayedJoin: wait the delay, again while members keep arriving,
                # within the rebalance timeout
                delay = self.config.initial_rebalance_delay_ms
                remaining = max(rebalance_timeout - delay, 0)
                while True:
                    group.new_member_added = False
                    await trio.sleep(delay / 1000)
                    if not (group.new_member_added and remaining > 0):
                        break
                    delay = min(self.config.initial_rebalance_delay_ms, remaining)
                    remaining -= delay
            deadline = trio.current_time() + rebalance_timeout / 1000
            while not group.has_all_members_joined():
                rebalance.member_joined = trio.Event()
                with trio.move_on_at(deadline):
                    await rebalance.member_joined.wait()
                if trio.current_time() >= deadline:
                    break
            if self._rebalances.get(group.group_id) is rebalance:
                del self._rebalances[group.group_id]
            await self._complete_join(group)

    async def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: dynamic members that did not rejoin are dropped (static ones stay
        until their session expires); the next generation starts, or the group becomes Empty (and
        that is stored)."""
        if self._live_group(group.group_id) is not group or not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            if m.group_instance_id is not None:
                continue  # static members keep their place until their session expires (KIP-345)
            log.info("member %s of group %s did not rejoin in time: removed", m.member_id, group.group_id)
            group.remove(m.member_id)
        for pending in list(group.pending_members):
            self._pending_deadlines.pop((group.group_id, pending), None)
        group.pending_members.clear()
        group.maybe_elect_new_joined_leader()
        group.init_next_generation(self.wall_clock_ms())
        log.info(
            "group %s: generation %d (%s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.size(),
        )
        if group.is_empty():
            # on a failed write the group stays Empty here; the log holds its previous generation
            await self.manager.write_group_records(
                group.group_id, [records.group_record(group.group_id, group.stored())], None
            )
            return
        members = self._member_list(group)
        for m in group.members.values():
            self._touch(m)
            self._answer_join(
                m, join_result(m.member_id, ErrorCode.NONE, group, members if group.is_leader(m.member_id) else ())
            )

    # ---- SyncGroup -----------------------------------------------------------------------------
    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        """SyncGroup (key 14): the leader's `assignments` {member id: bytes} are stored with the
        group before any member is answered."""
        error = self.group_error(group_id)
        if error != ErrorCode.NONE:
            return sync_result(error)
        group = self._live_group(group_id)
        if group is None:
            return sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.consumer is not None:
            return self.classic_members.classic_sync_consumer_group(group, generation_id, member_id, protocol_name)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return sync_result(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if group.is_in(GroupState.DEAD):
            return sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if member is None or group.is_in(GroupState.EMPTY):
            return sync_result(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return sync_result(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return sync_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return sync_result(ErrorCode.REBALANCE_IN_PROGRESS)
        self._touch(member)
        if group.is_in(GroupState.STABLE):
            return sync_result(ErrorCode.NONE, group, member.assignment)
        # CompletingRebalance
        self._answer_sync(member, sync_result(ErrorCode.REBALANCE_IN_PROGRESS))  # a repeated SyncGroup
        reply = member.sync_waiter = Reply[SyncGroupResult]()
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}

            def current() -> bool:
                return (
                    self._live_group(group_id) is group
                    and group.is_in(GroupState.COMPLETING_REBALANCE)
                    and group.generation_id == generation_id
                )

            def assigned(_: int) -> None:
                if not current():
                    return
                for m in group.members.values():
                    m.assignment = full[m.member_id]
                    if m.sync_waiter is not None:
                        self._answer_sync(m, sync_result(ErrorCode.NONE, group, m.assignment))
                        self._touch(m)
                group.transition_to(GroupState.STABLE, self.wall_clock_ms())
                log.info("group %s: generation %d is stable", group_id, generation_id)

            error = await self.manager.write_group_records(
                group_id, [records.group_record(group_id, group.stored(full))], assigned
            )
            if error != ErrorCode.NONE and current():
                for m in group.members.values():
                    self._answer_sync(m, sync_result(error))
                self._maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
        return await reply.wait()

    # ---- Heartbeat and LeaveGroup --------------------------------------------------------------
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Heartbeat (key 12): NONE, REBALANCE_IN_PROGRESS (rejoin), or the member's error."""
        error = self.group_error(group_id)
        if error != ErrorCode.NONE:
            return error
        group = self._live_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.consumer is not None:
            return self.classic_members.classic_heartbeat_consumer_group(group, generation_id, member_id)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member = group.members.get(member_id)
        if member is None or group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        # a member of the consumer group this group was converted from keeps its epoch until it rejoins
        if generation_id != group.generation_id and group.converted_epochs.get(member_id) != generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(member)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(GroupState.PREPARING_REBALANCE) else ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup (key 13): `leaving` [(member id, group instance id)]; (group error, one
        error per member)."""
        error = self.group_error(group_id)
        if error != ErrorCode.NONE:
            return error, [error] * len(leaving)
        group = self._live_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [ErrorCode.COORDINATOR_NOT_AVAILABLE] * len(leaving)
        if group.consumer is not None:
            return ErrorCode.NONE, self.classic_members.classic_leave_consumer_group(group, leaving)
        results = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                current = group.static_member_id(instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != current:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = current
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._pending_deadlines.pop((group_id, member_id), None)
                self._recheck_join(group)
                results.append(ErrorCode.NONE)
            elif group.has(member_id):
                self._remove_member_and_update_group(group, member_id, "the member left")
                results.append(ErrorCode.NONE)
            else:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
        return ErrorCode.NONE, results

    def _remove_member_and_update_group(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        self._answer_join(member, join_result(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        self._answer_sync(member, sync_result(ErrorCode.UNKNOWN_MEMBER_ID))
        log.info("group %s: member %s removed (%s)", group.group_id, member_id, reason)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member_id}: {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._recheck_join(group)

    def _sweep_sessions(self) -> None:
        """Members without a heartbeat for their session timeout are removed (members waiting
        for a JoinGroup or SyncGroup answer are alive); so are unused pending member ids. Run
        every SWEEP_INTERVAL_S on the runtime's timer."""
        now = self.now_ms()
        for (group_id, member_id), deadline in list(self._pending_deadlines.items()):
            if deadline <= now:
                del self._pending_deadlines[(group_id, member_id)]
                group = self._live_group(group_id)
                if group is not None and member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self._recheck_join(group)
        for group in list(self.manager.groups.values()):
            for m in list(group.members.values()):
                waiting = m.join_waiter is not None or m.sync_waiter is not None
                if not waiting and m.heartbeat_deadline_ms <= now:
                    self._remove_member_and_update_group(group, m.member_id, "session timeout expired")
