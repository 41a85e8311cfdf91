"""The consumer group protocol's trio shell (KIP-848), `ConsumerGroupCoordinator`, a part of `GroupCoordinator`: serves
ConsumerGroupHeartbeat over the pure `consumer_heartbeat.heartbeat`, writes its records to
`__consumer_offsets` through the runtime's write path and replays them onto the group once they
are committed, and expires members on the runtime's one timer.

- Heartbeats of one group take the group's turn on the runtime (`one_at_a_time`) from their
  decision to their write's commit, so each decision starts from the state the previous one
  left; different groups proceed in parallel.
- Sessions (`group.consumer.session.timeout.ms`, the same for every member): a member without a
  heartbeat for that long is removed, its partitions go to the others. A member told to revoke
  partitions has its `RebalanceTimeoutMs` to do so, or it is removed too. Deadlines are on the
  coordinator's monotonic clock and are not stored: a coordinator that loads a group starts every
  member's session anew.
- A group id names one group of one type: a consumer-protocol member joining an Empty classic
  group converts it (its offsets stay), a classic member joining an empty consumer group
  converts it back; a group with members of the other protocol answers GROUP_ID_NOT_FOUND
  (ConsumerGroupHeartbeat) or INCONSISTENT_GROUP_PROTOCOL (JoinGroup).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from coordinator.group import consumer_records as cr
from coordinator.group import records
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_group import ConsumerGroup, MemberState
from coordinator.group.consumer_heartbeat import (
    ConsumerGroupLimits,
    HeartbeatError,
    HeartbeatRequest,
    assignor_of,
    heartbeat,
    remove_member,
)
from coordinator.group.consumer_records import Assignment, ConsumerRecord, TopicMetadata
from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.migration import from_classic, may_downgrade, may_upgrade, to_classic
from coordinator.group.results import ConsumerGroupHeartbeatResult
from protocol.errors import ErrorCode
from protocol.topic_names import INTERNAL_TOPICS

log = logging.getLogger(__name__)
MemberKey = tuple[str, str]  # (group id, member id)


def assignment_out(assignment: Assignment | None) -> dict | None:
    """An Assignment as ConsumerGroupHeartbeat's / ConsumerGroupDescribe's struct."""
    if assignment is None:
        return None
    return {
        "topic_partitions": [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(assignment.items()) if ps]
    }


def assignment_in(topic_partitions) -> Assignment | None:
    if topic_partitions is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for t in topic_partitions:
        out[t.topic_id] = out.get(t.topic_id, frozenset()) | frozenset(t.partitions)
    return out


def heartbeat_result(error: int, message: str | None = None, **fields: Any) -> ConsumerGroupHeartbeatResult:
    """A ConsumerGroupHeartbeat answer (`fields`: those of ConsumerGroupHeartbeatResult)."""
    return ConsumerGroupHeartbeatResult(error, message, **fields)


class ConsumerGroupCoordinator:
    """The consumer group protocol (a part of `GroupCoordinator`), over the groups of its
    `GroupMetadataManager`; a conversion back to a classic group reaches the classic protocol
    through `fail_waiters(group, error)` and `prepare_rebalance(group, reason)`."""

    def __init__(
        self,
        manager: GroupMetadataManager,
        config: GroupCoordinatorConfig,
        metadata_cache: Any,
        now_ms: Callable[[], float],
        wall_clock_ms: Callable[[], int],
        fail_waiters: Callable[[GroupMetadata, ErrorCode], None],
        prepare_rebalance: Callable[[GroupMetadata, str], None],
    ) -> None:
        self.manager = manager
        self.config = config
        self.metadata_cache = metadata_cache
        self.now_ms = now_ms
        self.wall_clock_ms = wall_clock_ms
        self._fail_waiters = fail_waiters
        self._prepare_rebalance = prepare_rebalance
        #: (group id, member id) -> its session's deadline on `now_ms`'s clock (classic members too)
        self.session_deadlines: dict[MemberKey, float] = {}
        self._revocation_deadlines: dict[MemberKey, tuple[float, int]] = {}
        self._topics_view: tuple[int, dict[str, TopicMetadata]] = (-1, {})
        #: target assignments computed (Kafka's consumer-group-rebalance-count)
        self.consumer_rebalances = 0
        self._epoch_changed_at: dict[str, float] = {}  # group id -> when its epoch last changed (ms)
        c = self.config
        self._limits = ConsumerGroupLimits(
            c.consumer_heartbeat_interval_ms,
            c.consumer_session_timeout_ms,
            c.consumer_max_size,
            tuple(c.consumer_assignors),
        )

    def consumer_limits(self) -> ConsumerGroupLimits:
        return self._limits

    def consumer_topics(self) -> dict[str, TopicMetadata]:
        """The topics a consumer may subscribe to, by name (from the metadata cache, rebuilt
        when the cache changed)."""
        cache = self.metadata_cache
        if self._topics_view[0] != cache.version:
            view = {
                name: TopicMetadata(cache.topic_ids[name], name, len(parts))
                for name, parts in cache.partitions.items()
                if name not in INTERNAL_TOPICS and parts and name in cache.topic_ids
            }
            self._topics_view = (cache.version, view)
        return self._topics_view[1]

    def heartbeat_interval_ms(self, group: ConsumerGroup) -> int:
        """The interval a member is told to heartbeat at: `group.consumer.heartbeat.interval.ms`,
        or a tenth of it (at least 50 ms) while the group is not Stable or its epoch changed less
        than one interval ago, so members learn of a new target, acknowledge revocations and pick
        up released partitions within a fraction of the interval instead of one interval per step
        (Kafka 4 always answers the configured one; a changing group's extra heartbeats are the
        price, a settled group heartbeats at the configured interval)."""
        interval = self.config.consumer_heartbeat_interval_ms
        changed_at = self._epoch_changed_at.get(group.group_id)
        settled = changed_at is None or self.now_ms() - changed_at >= interval
        if settled and group.state in ("Stable", "Empty"):
            return interval
        return min(interval, max(interval // 10, 50))

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor the group's target is computed with."""
        return assignor_of(group.members, self.config.consumer_assignors)

    def lock(self, group_id: str) -> AbstractAsyncContextManager[None]:
        """The group's turn on the runtime (`CoordinatorRuntime.one_at_a_time`)."""
        return self.manager.runtime.one_at_a_time(group_id)

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
        turn and checked `downgrades`), then rebalance it; NONE, or the write's error (nothing
        changed), or NOT_COORDINATOR when the group was replaced meanwhile, or
        INCONSISTENT_GROUP_PROTOCOL when the members share no protocol (nothing is written; the
        leave proceeds as usual then)."""
        group = holder.consumer
        assert group is not None
        classic = to_classic(group, leaving, self.now_ms(), self.wall_clock_ms())
        if classic is None:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        entries = [cr.encode(r) for r in group.group_tombstones()]
        entries.append(records.group_record(holder.group_id, classic.stored()))
        applied = False

        def replay(_: int) -> None:
            nonlocal applied
            if self.manager.groups.get(holder.group_id) is not holder or holder.consumer is not group:
                return
            applied = True
            holder.consumer = None
            holder.replace_classic(classic)

        error = await self.manager.write_group_records(holder.group_id, entries, replay)
        if error != ErrorCode.NONE:
            return error
        if not applied:
            return ErrorCode.NOT_COORDINATOR
        for key in [k for k in self.session_deadlines if k[0] == holder.group_id]:
            del self.session_deadlines[key]
        log.info(
            "consumer group %s converted to a classic group (generation %d)", holder.group_id, holder.generation_id
        )
        self._prepare_rebalance(holder, "converted from a consumer group")
        return ErrorCode.NONE

    # ---- ConsumerGroupHeartbeat ------------------------------------------------------------------
    async def consumer_group_heartbeat(self, req: HeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        """One ConsumerGroupHeartbeat (API key 68), taken in its group's turn (`one_at_a_time`): its
        typed answer. UNSUPPORTED_VERSION when `group.coordinator.rebalance.protocols` leaves
        out "consumer", INVALID_REQUEST for an empty group id."""
        if "consumer" not in self.config.rebalance_protocols:
            return heartbeat_result(ErrorCode.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled.")
        if not req.group_id:
            return heartbeat_result(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        async with self.lock(req.group_id):
            return await self._heartbeat_locked(req)

    async def _heartbeat_locked(self, req: HeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        error = self.manager.coordinator_error(req.group_id)
        if error != ErrorCode.NONE:
            return heartbeat_result(error)
        holder = self.manager.groups.get(req.group_id)
        if holder is not None and holder.share is not None:
            return heartbeat_result(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if req.member_epoch == -1 and holder is not None and self.downgrades(holder, req.member_id):
            error = await self.downgrade(holder, req.member_id)
            if error != ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
                self._forget((req.group_id, req.member_id))
                return heartbeat_result(error, member_id=req.member_id, member_epoch=-1)
        conversion: list[tuple[bytes, bytes | None]] = []
        group = holder.consumer if holder is not None else None
        if holder is not None and group is None:
            if holder.members:  # an online upgrade of a classic group (KIP-848)
                group, conversion = self.upgrade_records(holder)
                if group is None:
                    return heartbeat_result(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
                    )
            elif holder.generation_id > 0:  # an Empty classic group becomes a consumer group
                conversion.append((records.group_key(req.group_id), None))
        if group is None:
            group = ConsumerGroup(req.group_id)
        try:
            outcome = heartbeat(
                group,
                req,
                self.consumer_topics(),
                self.consumer_limits(),
                str(uuid.uuid4()),
                defer_assignment=self.manager.runtime.waiting(req.group_id) > 0,
            )
        except HeartbeatError as e:
            return heartbeat_result(e.error_code, e.message)
        error = await self.write(req.group_id, group, holder, conversion, outcome.records)
        if error != ErrorCode.NONE:
            return heartbeat_result(error)
        key = (req.group_id, outcome.member_id or "")
        if outcome.member_epoch == -1:
            self._forget(key)
        elif outcome.member_epoch >= 0:
            self.session_deadlines[key] = self.now_ms() + self.config.consumer_session_timeout_ms
        member = group.members.get(outcome.member_id or "")
        if outcome.revoking and member is not None:
            timeout = member.metadata.rebalance_timeout_ms
            self._revocation_deadlines[key] = (self.now_ms() + max(timeout, 0), member.member_epoch)
        return heartbeat_result(
            ErrorCode.NONE,
            member_id=outcome.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group),
            assignment=outcome.assignment,
        )

    async def write(
        self,
        group_id: str,
        group: ConsumerGroup,
        holder: GroupMetadata | None,
        conversion: list[tuple[bytes, bytes | None]],
        changes: list[ConsumerRecord],
    ) -> ErrorCode:
        """Write the records (the runtime's write path; the caller holds the group's turn); once
        committed the group is installed (or converted) and replays `changes`. The coordinator's
        error when the write failed, NOT_COORDINATOR when the group was replaced meanwhile
        (nothing is applied then)."""
        entries = conversion + [cr.encode(r) for r in changes]
        applied = False

        def replay(_: int) -> None:
            nonlocal applied
            if self.manager.groups.get(group_id) is not holder:
                return  # written, and replaced meanwhile (deleted, or reloaded)
            applied = True
            self._apply(group_id, group, holder, bool(conversion), changes)

        error = await self.manager.write_group_records(group_id, entries, replay)
        if error != ErrorCode.NONE:
            return error
        return ErrorCode.NONE if applied or not entries else ErrorCode.NOT_COORDINATOR

    def _apply(
        self, group_id: str, group: ConsumerGroup, holder: GroupMetadata | None, converted: bool, changes: list
    ) -> None:
        """Committed consumer group records: the group is installed (or converted from a
        classic one) and replays `changes`."""
        if holder is None:
            holder = self.manager.groups[group_id] = GroupMetadata(group_id)
        holder.consumer = group
        if converted:  # the classic group's members (if any) are the consumer group's now
            self._fail_waiters(holder, ErrorCode.REBALANCE_IN_PROGRESS)
            holder.replace_classic(GroupMetadata(group_id))  # Empty, generation 0
            log.info("classic group %s converted to a consumer group", group_id)
        for record in changes:
            group.replay(record)
            if record.kind == cr.TARGET_ASSIGNMENT_METADATA and record.value is not None:
                self.consumer_rebalances += 1
            elif record.kind == cr.GROUP_EPOCH:
                if len(self._epoch_changed_at) > 100_000:
                    self._epoch_changed_at.clear()
                self._epoch_changed_at[group_id] = self.now_ms()

    def _forget(self, key: MemberKey) -> None:
        self.session_deadlines.pop(key, None)
        self._revocation_deadlines.pop(key, None)

    # ---- conversion back to a classic group --------------------------------------------------------
    async def consumer_group_to_classic(self, holder: GroupMetadata) -> ErrorCode:
        """A classic JoinGroup for a consumer group: an empty one is deleted (its offsets stay)
        so the classic protocol takes it over; one with members answers INCONSISTENT_GROUP_PROTOCOL."""
        group = holder.consumer
        if group is None:
            return ErrorCode.NONE
        if group.members:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        async with self.lock(holder.group_id):
            if holder.consumer is not group:
                return ErrorCode.NONE

            def replay(_: int) -> None:
                if holder.consumer is group:
                    holder.consumer = None

            tombstones = [cr.encode(r) for r in group.group_tombstones()]
            return await self.manager.write_group_records(holder.group_id, tombstones, replay)
        return ErrorCode.NONE

    # ---- the timer ---------------------------------------------------------------------------------
    async def sweep(self) -> None:
        """Remove members whose session expired or who missed their rebalance timeout (run on
        the runtime's timer)."""
        now = self.now_ms()
        live: set[MemberKey] = set()
        for holder in list(self.manager.groups.values()):
            group = holder.consumer
            if group is None or not group.members or self.manager.coordinator_error(holder.group_id) != ErrorCode.NONE:
                continue
            for member_id, member in list(group.members.items()):
                key = (holder.group_id, member_id)
                live.add(key)
                session_ms = (
                    member.metadata.classic.session_timeout_ms
                    if member.metadata.classic is not None
                    else self.config.consumer_session_timeout_ms
                )
                deadline = self.session_deadlines.setdefault(key, now + session_ms)
                revocation = self._revocation_deadlines.get(key)
                if deadline <= now:
                    await self.fence(holder, member_id, "session timeout expired")
                elif revocation is not None:
                    at, epoch = revocation
                    if member.state != MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
                        del self._revocation_deadlines[key]
                    elif at <= now:
                        await self.fence(holder, member_id, "rebalance timeout expired")
        for key in [k for k in self.session_deadlines if k not in live]:
            self._forget(key)

    async def fence(self, holder: GroupMetadata, member_id: str, reason: str) -> None:
        async with self.lock(holder.group_id):
            group = holder.consumer
            if (
                group is None
                or member_id not in group.members
                or self.manager.groups.get(holder.group_id) is not holder
            ):
                return
            if self.downgrades(holder, member_id):
                if await self.downgrade(holder, member_id) != ErrorCode.INCONSISTENT_GROUP_PROTOCOL:
                    return
            changes = remove_member(group, member_id, self.consumer_topics())
            error = await self.write(holder.group_id, group, holder, [], changes)
            if error != ErrorCode.NONE:
                return
            self._forget((holder.group_id, member_id))
            log.info("removed member %s of consumer group %s: %s", member_id, holder.group_id, reason)
