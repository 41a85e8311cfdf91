"""The partition state machine (Kafka `PartitionStateMachine` with `ZkPartitionStateMachine`'s
leadership writes).

States: NonExistent -> New -> Online <-> Offline -> NonExistent; `VALID_PREVIOUS` lists the
states each may be entered from, and `set_state` refuses any other transition (leaving the state
as it was). A leadership change bumps the leader epoch, is written to the partition state znode
conditionally on its zkVersion inside a multi-op fenced by /controller_epoch's zkVersion, and only
then becomes the controller's (LeaderAndIsr to the live replicas and UpdateMetadata to every live
broker are queued on the request batch; the caller sends the batch). A write that loses a race
re-reads the znode and retries; a lost fence means another controller took over, and `on_fenced`
is called (the controller resigns).

Leader choices come from `controller.election` (pure functions); `choose(current) -> (leader,
isr) | None` callables adapt them per partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller import election
from controller.channel import RequestBatch
from controller.context import ControllerContext
from metrics.stats import ControllerStats
from protocol.topic_partition import TopicPartition
from storage.topic_configs import TopicConfigs
from zk import znodes
from zk.client import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from zk.znodes import LeaderIsr

log = logging.getLogger(__name__)

NON_EXISTENT, NEW, ONLINE, OFFLINE = "NonExistent", "New", "Online", "Offline"
VALID_PREVIOUS = {
    NEW: {NON_EXISTENT},
    ONLINE: {NEW, ONLINE, OFFLINE},
    OFFLINE: {NEW, ONLINE, OFFLINE},
    NON_EXISTENT: {OFFLINE},
}

#: choose(current state or None) -> (leader, isr), or None to leave the partition as it is
Chooser = Callable[[LeaderIsr | None], "tuple[int, list[int]] | None"]


class IllegalStateChange(Exception):
    pass


def set_state(ctx: ControllerContext, tp: TopicPartition, state: str) -> None:
    """Move `tp` to `state`; raises IllegalStateChange (nothing changes) unless its current state
    is one of `VALID_PREVIOUS[state]`."""
    current = ctx.partition_states.get(tp, NON_EXISTENT)
    if current not in VALID_PREVIOUS[state]:
        raise IllegalStateChange(f"{tp}: {current} -> {state}")
    if state == NON_EXISTENT:
        ctx.partition_states.pop(tp, None)
    else:
        ctx.partition_states[tp] = state


class PartitionStateMachine:
    """Leadership changes for one controller epoch (made anew at every failover)."""

    def __init__(
        self,
        zk: ZkClient,
        ctx: ControllerContext,
        batch: RequestBatch,
        topic_configs: TopicConfigs,
        *,
        is_active: Callable[[], bool],
        on_fenced: Callable[[str], None],
        stats: ControllerStats | None = None,
    ):
        self.stats = stats if stats is not None else ControllerStats()
        self.zk = zk
        self.ctx = ctx
        self.batch = batch
        self.topic_configs = topic_configs
        self.is_active = is_active
        self.on_fenced = on_fenced

    # ---- one partition ---------------------------------------------------------------------------
    def _next_state(self, tp: TopicPartition, choose: Chooser) -> tuple[LeaderIsr | None, LeaderIsr | None]:
        """(current state, the state `choose` asks for with the leader epoch bumped; None when it
        declines)."""
        current = self.ctx.leadership.get(tp)
        chosen = choose(current)
        if chosen is None:
            return current, None
        leader, isr = chosen
        return current, LeaderIsr(
            leader,
            (current.leader_epoch + 1) if current else 0,
            tuple(isr),
            self.ctx.epoch,
            current.zk_version if current else 0,
        )

    async def _write_leadership(self, tp: TopicPartition, new: LeaderIsr, create: bool) -> LeaderIsr | None:
        """Fenced write of a partition state znode; returns the stored state (with its new
        zkVersion), or None if the write lost a race (the caller re-reads)."""
        path = znodes.partition_state_path(*tp)
        try:
            if create:
                await self.zk.ensure_path(path.rsplit("/", 1)[0])
                await self.zk.fenced_write(
                    znodes.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, [("create", path, new.encode())]
                )
                version = 0
            else:
                (stat,) = await self.zk.fenced_write(
                    znodes.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, [("set", path, new.encode(), new.zk_version)]
                )
                version = stat.version
        except (BadVersionError, NodeExistsError, NoNodeError) as e:
            log.info("partition state write for %s lost a race (%s); re-reading", tp, type(e).__name__)
            fenced = await self.zk.get(znodes.CONTROLLER_EPOCH)
            if fenced[1].version != self.ctx.epoch_zk_version:
                self.on_fenced("the controller epoch moved on")
            return None
        stored = LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, version)
        self.ctx.leadership[tp] = stored
        return stored

    def _adopt(self, tp: TopicPartition, stored: LeaderIsr, is_new: bool) -> None:
        """A written state becomes the controller's, and LeaderAndIsr + UpdateMetadata are queued.
        LeaderAndIsr goes to the live replicas but those of brokers shutting down (Kafka's
        `isReplicaOnline`): such a broker keeps its old epoch, so its fetches as a follower are
        fenced and its leader cannot take it back into the ISR the controlled shutdown took it out of."""
        self.ctx.leadership[tp] = stored
        live = self.ctx.live_ids
        replicas = self.ctx.replicas(tp)
        online = [r for r in replicas if r in live and r not in self.ctx.shutting_down]
        self.batch.add_leader_and_isr(online, tp, stored, replicas, is_new=is_new)
        self.batch.add_update_metadata(live, tp, stored, replicas, live)

    async def change_leadership(self, tp: TopicPartition, choose: Chooser) -> bool:
        """Apply `choose` with a leader-epoch bump, fenced and conditional; re-reads and retries
        (3 attempts) when the znode changed under us. Queues LeaderAndIsr and UpdateMetadata.
        Returns whether the partition now has the chosen leadership."""
        for _ in range(3):
            current, new = self._next_state(tp, choose)
            if new is None:
                return False
            stored = await self._write_leadership(tp, new, create=current is None)
            if stored is not None:
                self._adopt(tp, stored, is_new=current is None)
                return True
            if not self.is_active():
                return False
            found = await self.zk.get_or_none(znodes.partition_state_path(*tp))
            if found is not None:
                self.ctx.leadership[tp] = LeaderIsr.decode(found[0], found[1].version)
        return False

    # ---- many partitions ---------------------------------------------------------------------------
    async def change_leaderships(self, changes: list[tuple[TopicPartition, Chooser]]) -> dict[TopicPartition, bool]:
        """`change_leadership` for many partitions: the first attempt of every write is pipelined
        in one go (Kafka's controller batches its ZooKeeper writes the same way); a partition whose
        write lost a race takes the one-at-a-time path (re-read, retry)."""
        done = {tp: False for tp, _ in changes}
        plans = []
        for tp, choose in changes:
            current, new = self._next_state(tp, choose)
            if new is not None:
                plans.append((tp, choose, current, new))
        for topic in {tp[0] for tp, _, current, _ in plans if current is None}:
            await self.zk.ensure_path(f"{znodes.topic_path(topic)}/partitions")
        op_lists = []
        for tp, _, current, new in plans:
            path = znodes.partition_state_path(*tp)
            op_lists.append(
                [("create", path.rsplit("/", 1)[0], b""), ("create", path, new.encode())]
                if current is None
                else [("set", path, new.encode(), new.zk_version)]
            )
        outcomes = await self.zk.fenced_write_many(znodes.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, op_lists)
        retry = []
        for (tp, choose, current, new), outcome in zip(plans, outcomes):
            if isinstance(outcome, Exception):
                retry.append((tp, choose))
                continue
            version = 0 if current is None else outcome[-1].version
            self._adopt(
                tp,
                LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, version),
                is_new=current is None,
            )
            done[tp] = True
        for tp, choose in retry:
            if self.is_active():
                done[tp] = await self.change_leadership(tp, choose)
        return done

    async def elect_leaders(self, partitions: list[TopicPartition], *, allow_unclean: bool = False) -> None:
        """New/Offline -> Online with the offline (or new-partition) selector, honouring each
        topic's unclean.leader.election.enable (`allow_unclean`: an ElectLeaders request of type
        unclean allows it whatever the config); a partition left without a live leader goes
        Offline. Queues the requests; the caller sends the batch."""
        live = self.ctx.live_ids - self.ctx.shutting_down

        def chooser(tp: TopicPartition) -> Chooser:
            replicas = self.ctx.replicas(tp)
            unclean = allow_unclean or self.topic_configs.unclean_leader_election_enable(tp[0])
            usable = live - self.ctx.offline_on(tp)  # a replica in a failed log dir cannot lead

            def choose(current):
                if current is None:  # a new partition: all live replicas start in sync
                    live_replicas = [r for r in replicas if r in usable]
                    return (live_replicas[0], live_replicas) if live_replicas else None
                chosen = election.offline_partition_leader(replicas, list(current.isr), usable, unclean)
                if chosen is not None and chosen[0] not in current.isr:
                    self.stats.unclean_leader_elections += 1
                    log.warning(
                        "UNCLEAN leader election for %s-%d: broker %d leads without being in the ISR %s; "
                        "records only the old ISR held are lost",
                        *tp,
                        chosen[0],
                        list(current.isr),
                    )
                return chosen

            return choose

        done = await self.change_leaderships([(tp, chooser(tp)) for tp in partitions])
        for tp in partitions:
            if done[tp]:
                self.stats.leader_elections += 1
                set_state(self.ctx, tp, ONLINE)
            elif tp in self.ctx.leadership and self.ctx.leadership[tp].leader not in live - self.ctx.offline_on(tp):
                set_state(self.ctx, tp, OFFLINE)
                log.warning("%s-%d has no live in-sync replica: offline", *tp)
