"""Partition reassignment (KIP-455, Kafka `KafkaController.onPartitionReassignment`, ZooKeeper mode).

With origin replicas ORS, target TRS, adding ARS = TRS - ORS and removing RRS = ORS - TRS:
1. Write the full replica set RS = TRS + ORS (TRS first, no repeats) with ARS and RRS into
   /brokers/topics/<topic>, and send LeaderAndIsr with a bumped leader epoch to every replica in
   RS, so the adding replicas start following the leader.
2. When every replica of TRS is in the ISR (checked at start and on every ISR change notification):
   RS = TRS in memory; keep the leader if it is in TRS and live, otherwise elect the first live
   in-sync member of TRS; the ISR drops RRS; bump the leader epoch (LeaderAndIsr to TRS,
   UpdateMetadata to all); StopReplica with delete to the live replicas of RRS; write RS = TRS
   without ARS/RRS to ZooKeeper; drop the partition from /admin/reassign_partitions if it came from there.
A reassignment can be replaced by another target (replicas added by the old one and not wanted by
the new one are stopped and deleted) or cancelled (the target becomes the origin). A new controller
resumes every reassignment it finds in ZooKeeper (adding/removing replicas recorded) at step 1.
`plan` is pure; the manager works on the controller's context, in its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.channel import RequestBatch
from controller.context import ControllerContext, Reassignment
from controller.partition_state_machine import PartitionStateMachine
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import ZERO_UUID
from zk import znodes
from zk.client import NoNodeError, ZkClient

log = logging.getLogger(__name__)


def plan(origin: list[int], target: list[int], legacy: bool = False) -> tuple[list[int], Reassignment]:
    """(full replica set, reassignment) moving `origin` to `target` (Kafka's `reassignTo`)."""
    full = list(dict.fromkeys(target + origin))
    return full, Reassignment(
        list(target), [r for r in full if r not in origin], [r for r in full if r not in target], legacy
    )


def check_target(target: list[int], known_brokers: set[int]) -> str | None:
    """Why a target replica set is invalid (INVALID_REPLICA_ASSIGNMENT), or None."""
    if not target:
        return "The replica set cannot be empty."
    if len(set(target)) != len(target):
        return f"Duplicate replica assignment {target}."
    unknown = sorted(set(target) - known_brokers)
    if unknown:
        return f"The proposed assignment contains non-existent brokerIDs: {', '.join(map(str, unknown))}"
    return None


class ReassignmentManager:
    """Reassignments for one controller epoch; `send_batch` sends the queued requests."""

    def __init__(
        self,
        zk: ZkClient,
        ctx: ControllerContext,
        batch: RequestBatch,
        partition_state_machine: PartitionStateMachine,
        send_batch: Callable[[], None],
    ):
        self.zk = zk
        self.ctx = ctx
        self.batch = batch
        self.psm = partition_state_machine
        self.send_batch = send_batch

    # ---- requests ----------------------------------------------------------------------------------
    async def alter(self, requests: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, tuple[int, str]]:
        """AlterPartitionReassignments: target replicas, or None to cancel. Returns per partition
        (error code, message)."""
        results: dict[TopicPartition, tuple[int, str]] = {}
        for tp, target in requests.items():
            if tp[0] not in self.ctx.assignments or tp[1] not in self.ctx.assignments[tp[0]]:
                results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {tp[0]}-{tp[1]}")
                continue
            if target is None:
                ongoing = self.ctx.reassignments.get(tp)
                if ongoing is None:
                    results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress")
                    continue
                target = self.origin(tp)
            else:
                why = check_target(list(target), self.ctx.live_ids)
                if why is not None:
                    results[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, why)
                    continue
            await self.start(tp, list(target))
            results[tp] = (ErrorCode.NONE, "")
        return results

    def ongoing(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, Reassignment]:
        """ListPartitionReassignments: the ongoing ones (of `partitions`, or all)."""
        return {tp: r for tp, r in sorted(self.ctx.reassignments.items()) if partitions is None or tp in partitions}

    def origin(self, tp: TopicPartition) -> list[int]:
        ongoing = self.ctx.reassignments.get(tp)
        return [r for r in self.ctx.replicas(tp) if ongoing is None or r not in ongoing.adding]

    # ---- the steps ---------------------------------------------------------------------------------
    async def start(self, tp: TopicPartition, target: list[int], legacy: bool = False) -> None:
        """Step 1, then step 2 at once if the target is already in sync."""
        before = list(self.ctx.replicas(tp))
        full, reassignment = plan(self.origin(tp), target, legacy)
        if reassignment.adding == [] and reassignment.removing == [] and full == before:
            self.ctx.reassignments.pop(tp, None)
            await self._write_assignment(tp[0])
            await self._legacy_done(tp)
            return
        self.ctx.assignments[tp[0]][tp[1]] = full
        self.ctx.reassignments[tp] = reassignment
        await self._write_assignment(tp[0])
        log.info("controller: reassigning %s-%d from %s to %s (full set %s)", *tp, before, target, full)
        dropped = [r for r in before if r not in full]  # added by a replaced reassignment
        live = self.ctx.live_ids
        leader = self.ctx.leadership.get(tp)
        if leader is not None and leader.leader in live:
            await self.psm.change_leadership(tp, lambda cur: None if cur is None else (cur.leader, list(cur.isr)))
        if dropped:
            epoch = self.ctx.leadership[tp].leader_epoch if tp in self.ctx.leadership else -1
            self.batch.add_stop_replica([r for r in dropped if r in live], tp, delete=True, leader_epoch=epoch)
        self.send_batch()
        await self.maybe_complete(tp)

    async def maybe_complete(self, tp: TopicPartition) -> bool:
        """Step 2 if every target replica is in the ISR; returns whether the reassignment ended."""
        reassignment = self.ctx.reassignments.get(tp)
        state = self.ctx.leadership.get(tp)
        if reassignment is None or state is None or not set(reassignment.target) <= set(state.isr):
            return False
        live = self.ctx.live_ids - self.ctx.shutting_down
        target = reassignment.target

        def choose(current):
            if current is None:
                return None
            isr = [r for r in current.isr if r in target]
            if current.leader in target and current.leader in live:
                return current.leader, isr
            leader = next((r for r in target if r in isr and r in live), None)
            return None if leader is None else (leader, isr)

        full = self.ctx.replicas(tp)
        self.ctx.assignments[tp[0]][tp[1]] = list(target)
        if not await self.psm.change_leadership(tp, choose):
            self.ctx.assignments[tp[0]][tp[1]] = full  # no live in-sync target replica yet: later
            return False
        removed = [r for r in reassignment.removing if r in self.ctx.live_ids]
        self.batch.add_stop_replica(removed, tp, delete=True, leader_epoch=self.ctx.leadership[tp].leader_epoch)
        del self.ctx.reassignments[tp]
        self.send_batch()
        await self._write_assignment(tp[0])
        log.info("controller: reassignment of %s-%d to %s completed", *tp, target)
        if reassignment.legacy:
            await self._legacy_done(tp)
        return True

    async def on_isr_change(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            if tp in self.ctx.reassignments:
                await self.maybe_complete(tp)

    async def resume(self) -> None:
        """After a failover: resume every reassignment found in ZooKeeper."""
        for tp, reassignment in list(self.ctx.reassignments.items()):
            log.info("controller: resuming the reassignment of %s-%d to %s", *tp, reassignment.target)
            await self.start(tp, reassignment.target, reassignment.legacy)

    # ---- ZooKeeper ---------------------------------------------------------------------------------
    async def _write_assignment(self, topic: str) -> None:
        assignment = self.ctx.assignments[topic]
        adding = {tp[1]: r.adding for tp, r in self.ctx.reassignments.items() if tp[0] == topic}
        removing = {tp[1]: r.removing for tp, r in self.ctx.reassignments.items() if tp[0] == topic}
        topic_id = self.ctx.topic_ids.get(topic) or ZERO_UUID
        data = znodes.encode_topic_assignment(assignment, topic_id, adding, removing)
        await self.zk.set(znodes.topic_path(topic), data)

    async def on_legacy_request(self, data: bytes | None) -> None:
        """/admin/reassign_partitions was written (tools such as kafka-reassign-partitions.sh with
        --zookeeper): start each partition's reassignment; unusable entries are dropped from it."""
        if data is None:
            return
        try:
            targets = znodes.decode_reassign_partitions(data)
        except ValueError as e:
            log.warning("controller: ignoring %s: %s", znodes.REASSIGN_PARTITIONS, e)
            await self._delete_legacy()
            return
        for tp, target in targets.items():
            ongoing = self.ctx.reassignments.get(tp)
            known = tp[0] in self.ctx.assignments and tp[1] in self.ctx.assignments[tp[0]]
            if not known or check_target(target, self.ctx.live_ids) is not None:
                log.warning("controller: dropping the reassignment of %s-%d to %s: invalid", *tp, target)
                await self._legacy_done(tp)
            elif ongoing is None or ongoing.target != target:
                await self.start(tp, target, legacy=True)
            else:
                ongoing.legacy = True

    async def _legacy_done(self, tp: TopicPartition) -> None:
        found = await self.zk.get_or_none(znodes.REASSIGN_PARTITIONS)
        if found is None:
            return
        try:
            targets = znodes.decode_reassign_partitions(found[0])
        except ValueError:
            targets = {}
        targets.pop(tp, None)
        if not targets:
            await self._delete_legacy()
        else:
            await self.zk.set(znodes.REASSIGN_PARTITIONS, znodes.encode_reassign_partitions(targets))

    async def _delete_legacy(self) -> None:
        try:
            await self.zk.delete(znodes.REASSIGN_PARTITIONS)
        except NoNodeError:
            pass
