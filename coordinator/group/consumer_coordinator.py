"""The consumer group protocol's trio shell (KIP-848), mixed into `GroupCoordinator`: serves
ConsumerGroupHeartbeat over the pure `consumer_heartbeat.heartbeat`, appends its records to
`__consumer_offsets` and only then replays them onto the group, and expires members on the
runtime's one timer.

- Heartbeats of one group are serialised by a lock held across the append, so each decision
  starts from the state the previous one left; different groups proceed in parallel.
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
from typing import TYPE_CHECKING, Any

import trio

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
from coordinator.group.group_metadata import GroupMetadata, GroupState
from coordinator.group.manager import GroupMetadataManager
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


def heartbeat_result(error: int, message: str | None = None, **fields: Any) -> dict:
    """A ConsumerGroupHeartbeat response body (v0-1)."""
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": message,
        "member_id": fields.get("member_id"),
        "member_epoch": fields.get("member_epoch", 0),
        "heartbeat_interval_ms": fields.get("heartbeat_interval_ms", 0),
        "assignment": fields.get("assignment"),
    }


class ConsumerGroupOperations:
    """The consumer-protocol half of `GroupCoordinator` (which provides these attributes)."""

    config: GroupCoordinatorConfig
    manager: GroupMetadataManager
    metadata_cache: Any
    now_ms: Callable[[], float]

    if TYPE_CHECKING:  # provided by ClassicMemberOperations / GroupCoordinator

        def upgrade_records(self, holder: GroupMetadata) -> tuple[ConsumerGroup | None, list]: ...
        def downgrades(self, holder: GroupMetadata, leaving: str) -> bool: ...
        async def downgrade(self, holder: GroupMetadata, leaving: str) -> ErrorCode: ...
        def _fail_waiters(self, group: GroupMetadata, error: ErrorCode) -> None: ...

    def _init_consumer_groups(self) -> None:
        self._consumer_locks: dict[str, trio.Lock] = {}
        self._session_deadlines: dict[MemberKey, float] = {}
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

    def _lock(self, group_id: str) -> trio.Lock:
        lock = self._consumer_locks.get(group_id)
        if lock is None:
            if len(self._consumer_locks) > 100_000:
                self._consumer_locks = {g: lk for g, lk in self._consumer_locks.items() if lk.locked()}
            lock = self._consumer_locks[group_id] = trio.Lock()
        return lock

    # ---- ConsumerGroupHeartbeat ------------------------------------------------------------------
    async def consumer_group_heartbeat(self, req: HeartbeatRequest) -> dict:
        """One ConsumerGroupHeartbeat (API key 68) answered as a response body."""
        if "consumer" not in self.config.rebalance_protocols:
            return heartbeat_result(ErrorCode.UNSUPPORTED_VERSION, "The consumer group protocol is not enabled.")
        if not req.group_id:
            return heartbeat_result(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        lock = self._lock(req.group_id)
        async with lock:
            return await self._heartbeat_locked(req, lock)

    async def _heartbeat_locked(self, req: HeartbeatRequest, lock: trio.Lock) -> dict:
        error = self.manager.coordinator_error(req.group_id)
        if error != ErrorCode.NONE:
            return heartbeat_result(error)
        holder = self.manager.groups.get(req.group_id)
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
                defer_assignment=lock.statistics().tasks_waiting > 0,
            )
        except HeartbeatError as e:
            return heartbeat_result(e.error, e.message)
        error = await self._write(req.group_id, group, holder, conversion, outcome.records)
        if error != ErrorCode.NONE:
            return heartbeat_result(error)
        key = (req.group_id, outcome.member_id or "")
        if outcome.member_epoch == -1:
            self._forget(key)
        elif outcome.member_epoch >= 0:
            self._session_deadlines[key] = self.now_ms() + self.config.consumer_session_timeout_ms
        member = group.members.get(outcome.member_id or "")
        if outcome.revoking and member is not None:
            timeout = member.metadata.rebalance_timeout_ms
            self._revocation_deadlines[key] = (self.now_ms() + max(timeout, 0), member.member_epoch)
        return heartbeat_result(
            ErrorCode.NONE,
            member_id=outcome.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group),
            assignment=assignment_out(outcome.assignment),
        )

    async def _write(
        self,
        group_id: str,
        group: ConsumerGroup,
        holder: GroupMetadata | None,
        conversion: list[tuple[bytes, bytes | None]],
        changes: list[ConsumerRecord],
    ) -> ErrorCode:
        """Append the records, then apply them: the group is installed (or converted) and
        replays `changes`. The coordinator's error when the append failed or the partition
        moved meanwhile (nothing is applied then)."""
        entries = conversion + [cr.encode(r) for r in changes]
        if not entries:
            return ErrorCode.NONE
        error, _ = await self.manager.append(group_id, entries, group_metadata=True)
        if error != ErrorCode.NONE:
            return error
        if (
            self.manager.coordinator_error(group_id) != ErrorCode.NONE
            or self.manager.groups.get(group_id) is not holder
        ):
            return ErrorCode.NOT_COORDINATOR  # written, and the next coordinator loads it
        if holder is None:
            holder = self.manager.groups[group_id] = GroupMetadata(group_id)
        holder.consumer = group
        if conversion:  # the classic group's members (if any) are the consumer group's now
            self._fail_waiters(holder, ErrorCode.REBALANCE_IN_PROGRESS)
            holder.members, holder.static_members, holder.pending_members = {}, {}, set()
            holder.state, holder.generation_id = GroupState.EMPTY, 0
            holder.protocol_type = holder.protocol_name = holder.leader_id = None
            log.info("classic group %s converted to a consumer group", group_id)
        for record in changes:
            group.replay(record)
            if record.kind == cr.TARGET_ASSIGNMENT_METADATA and record.value is not None:
                self.consumer_rebalances += 1
            elif record.kind == cr.GROUP_EPOCH:
                if len(self._epoch_changed_at) > 100_000:
                    self._epoch_changed_at.clear()
                self._epoch_changed_at[group_id] = self.now_ms()
        return ErrorCode.NONE

    def _forget(self, key: MemberKey) -> None:
        self._session_deadlines.pop(key, None)
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
        async with self._lock(holder.group_id):
            if holder.consumer is not group:
                return ErrorCode.NONE
            tombstones = group.group_tombstones()
            error, _ = await self.manager.append(
                holder.group_id, [cr.encode(r) for r in tombstones], group_metadata=True
            )
            if error != ErrorCode.NONE:
                return error
            holder.consumer = None
        return ErrorCode.NONE

    # ---- the timer ---------------------------------------------------------------------------------
    async def _sweep_consumer_groups(self) -> None:
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
                deadline = self._session_deadlines.setdefault(key, now + session_ms)
                revocation = self._revocation_deadlines.get(key)
                if deadline <= now:
                    await self._fence(holder, member_id, "session timeout expired")
                elif revocation is not None:
                    at, epoch = revocation
                    if member.state != MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
                        del self._revocation_deadlines[key]
                    elif at <= now:
                        await self._fence(holder, member_id, "rebalance timeout expired")
        for key in [k for k in self._session_deadlines if k not in live]:
            self._forget(key)

    async def _fence(self, holder: GroupMetadata, member_id: str, reason: str) -> None:
        async with self._lock(holder.group_id):
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
            error = await self._write(holder.group_id, group, holder, [], changes)
            if error != ErrorCode.NONE:
                return
            self._forget((holder.group_id, member_id))
            log.info("removed member %s of consumer group %s: %s", member_id, holder.group_id, reason)
