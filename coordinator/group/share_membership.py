"""The share group protocol's trio shell (KIP-932), `ShareGroups`, a part of `GroupCoordinator`:
serves ShareGroupHeartbeat over the pure `share_heartbeat.heartbeat`, writes its records to
`__consumer_offsets` through the runtime's write path, replays them onto the group once they are
committed (the same replay a load runs), and expires members on the runtime's one timer.

- Heartbeats of one group take the group's turn on the runtime (`one_at_a_time`) from their
  decision to their write's commit.
- Sessions (`share.session.timeout.ms` of the group, `group.share.session.timeout.ms` by default;
  the heartbeat interval likewise): a member without a heartbeat for that long is
  removed, as if it had left. Deadlines are on the coordinator's monotonic clock and are not
  stored: a coordinator that loads a group starts every member's session anew.
- A group id names one group of one type: a share heartbeat for a classic or consumer group
  answers GROUP_ID_NOT_FOUND ("Group g is not a share group."), as Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordinator.group import share_records as sr
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.consumer_heartbeat import HeartbeatError
from coordinator.group.consumer_records import TopicMetadata
from coordinator.group.group_config import GroupConfigs
from coordinator.group.group_metadata import GroupMetadata
from coordinator.group.manager import GroupMetadataManager
from coordinator.group.results import ShareGroupHeartbeatResult
from coordinator.group.share_group import LEAVE_EPOCH, ShareGroup
from coordinator.group.share_heartbeat import ShareHeartbeatRequest, heartbeat, leave
from protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class ShareGroups:
    def __init__(
        self,
        manager: GroupMetadataManager,
        config: GroupCoordinatorConfig,
        topics: Callable[[], dict[str, TopicMetadata]],
        now_ms: Callable[[], float],
        group_configs: GroupConfigs,
    ) -> None:
        self.manager = manager
        self.group_configs = group_configs
        self.config = config
        self.topics = topics
        self.now_ms = now_ms
        #: (group id, member id) -> its session's deadline on `now_ms`'s clock
        self.session_deadlines: dict[tuple[str, str], float] = {}
        self.rebalances = 0  # target assignments computed (share-group-rebalance-count)

    def group(self, group_id: str) -> ShareGroup | None:
        holder = self.manager.groups.get(group_id)
        return holder.share if holder is not None else None

    async def share_group_heartbeat(self, req: ShareHeartbeatRequest) -> ShareGroupHeartbeatResult:
        """One ShareGroupHeartbeat (API key 76) in its group's turn: its typed answer, with the
        coordinator's error (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a failed write's) or
        the heartbeat's (INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND for a group of another type)."""
        if not req.group_id:
            return ShareGroupHeartbeatResult(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        async with self.manager.runtime.one_at_a_time(req.group_id):
            return await self._heartbeat_in_turn(req)

    async def _heartbeat_in_turn(self, req: ShareHeartbeatRequest) -> ShareGroupHeartbeatResult:
        error = self.manager.coordinator_error(req.group_id)
        if error != ErrorCode.NONE:
            return ShareGroupHeartbeatResult(error)
        holder = self.manager.groups.get(req.group_id)
        if holder is not None and holder.share is None:
            return ShareGroupHeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group."
            )
        group = holder.share if holder is not None and holder.share is not None else ShareGroup(req.group_id)
        try:
            outcome = heartbeat(group, req, self.topics(), self.config.share_max_size)
        except HeartbeatError as e:
            return ShareGroupHeartbeatResult(e.error_code, e.message)
        error = await self.write(req.group_id, holder, group, outcome.records)
        if error != ErrorCode.NONE:
            return ShareGroupHeartbeatResult(error)
        self.rebalances += sum(1 for r in outcome.records if r.kind == sr.TARGET_ASSIGNMENT_METADATA)
        key = (req.group_id, req.member_id)
        if outcome.member_epoch == LEAVE_EPOCH:
            self.session_deadlines.pop(key, None)
            log.info("member %s left share group %s", req.member_id, req.group_id)
        else:
            self.session_deadlines[key] = self.now_ms() + self._session_ms(req.group_id)
        return ShareGroupHeartbeatResult(
            ErrorCode.NONE,
            member_id=outcome.member_id,
            member_epoch=outcome.member_epoch,
            heartbeat_interval_ms=self.group_configs.get(req.group_id, "share.heartbeat.interval.ms"),
            assignment=outcome.assignment,
        )

    async def write(
        self, group_id: str, holder: GroupMetadata | None, group: ShareGroup, records: list[sr.ShareRecord]
    ) -> ErrorCode:
        """Write `records` of `group` (in its turn); once committed the group is installed (when
        new: `holder` None) and replays them. NOT_COORDINATOR when the group was replaced
        meanwhile."""
        if not records:
            return ErrorCode.NONE
        applied = False

        def replay(_: int) -> None:
            nonlocal applied
            current = self.manager.groups.get(group_id)
            if current is not holder and not (holder is None and current is None):
                return  # written, and replaced meanwhile (deleted, or reloaded)
            target = (
                current if current is not None else self.manager.groups.setdefault(group_id, GroupMetadata(group_id))
            )
            if target.share is None:
                target.share = group
            applied = True
            for record in records:
                group.replay(record)

        entries = [sr.encode(r) for r in records]
        error = await self.manager.write_group_records(group_id, entries, replay)
        if error != ErrorCode.NONE:
            return error
        return ErrorCode.NONE if applied else ErrorCode.NOT_COORDINATOR

    def _session_ms(self, group_id: str) -> int:
        """`share.session.timeout.ms` of the group (`group.share.session.timeout.ms` unless the
        group overrides it)."""
        return self.group_configs.get(group_id, "share.session.timeout.ms")

    # ---- the timer -------------------------------------------------------------------------------
    async def sweep(self) -> None:
        """Remove members whose session expired (run on the runtime's timer)."""
        now = self.now_ms()
        live: set[tuple[str, str]] = set()
        for holder in list(self.manager.groups.values()):
            group = holder.share
            if group is None or not group.members or self.manager.coordinator_error(holder.group_id) != ErrorCode.NONE:
                continue
            for member_id in list(group.members):
                key = (holder.group_id, member_id)
                live.add(key)
                if self.session_deadlines.setdefault(key, now + self._session_ms(holder.group_id)) <= now:
                    await self.fence(holder.group_id, member_id, "session timeout expired")
        for key in [k for k in self.session_deadlines if k not in live]:
            del self.session_deadlines[key]

    async def fence(self, group_id: str, member_id: str, reason: str) -> None:
        async with self.manager.runtime.one_at_a_time(group_id):
            holder = self.manager.groups.get(group_id)
            group = holder.share if holder is not None else None
            if group is None or member_id not in group.members:
                return
            if await self.write(group_id, holder, group, leave(group, member_id).records) == ErrorCode.NONE:
                self.session_deadlines.pop((group_id, member_id), None)
                log.info("removed member %s of share group %s: %s", member_id, group_id, reason)
