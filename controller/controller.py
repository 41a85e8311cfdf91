"""The controller component every broker runs; exactly one is active (Kafka `KafkaController`,
ZooKeeper mode).

Election: create the ephemeral /controller znode; the winner increments /controller_epoch with a
conditional update and becomes active (`_on_failover`); when /controller goes away every broker
tries again; an active controller that sees another id there resigns (its watches are dropped and
its request channels closed).

Everything the controller does happens in one trio task consuming one event channel: ZooKeeper
watch notifications (posted from kazoo threads through the trio token), requests forwarded by the
broker (CreateTopics, DeleteTopics, ControlledShutdown), periodic rebalance checks. So the context
needs no locks. Every partition-state write is fenced by /controller_epoch's zkVersion (a multi-op
check), and every request to brokers carries the controller epoch, so a deposed controller
(a zombie) can neither write ZooKeeper nor move a broker.

Leader changes bump the leader epoch, are written to the partition state znode conditionally on
its zkVersion, then sent as LeaderAndIsr to the replicas and UpdateMetadata to every live broker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from broker import zkdata
from broker.config import BrokerConfig
from broker.zk import BadVersionError, NodeExistsError, NoNodeError, ZkClient
from broker.zkdata import BrokerRegistration, LeaderIsr
from controller import election
from controller.channel import BrokerChannels, RequestBatch
from controller.context import NEW, NON_EXISTENT, OFFLINE, ONLINE, ControllerContext, TopicPartition
from controller.topics import TopicError, plan_topic, write_topic
from protocol.errors import ErrorCode
from protocol.types import ZERO_UUID
from storage.topic_configs import TopicConfigs

log = logging.getLogger(__name__)


@dataclass
class Event:
    kind: str
    data: Any = None
    reply: Callable[[Any], None] | None = None


class _WatchHandle:
    """Lets a kazoo callback know its watch should stop (kazoo drops a watch whose callback
    returns False)."""

    def __init__(self) -> None:
        self.active = True


class KafkaController:
    def __init__(self, config: BrokerConfig, zk: ZkClient, topic_configs: TopicConfigs):
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.topic_configs = topic_configs
        self.ctx = ControllerContext()
        self.active = False
        self._send, self._receive = trio.open_memory_channel(1 << 16)
        self._token: trio.lowlevel.TrioToken | None = None
        self._active_scope: trio.CancelScope | None = None
        self._watches: list[_WatchHandle] = []
        self.channels: BrokerChannels | None = None
        self.batch = RequestBatch(self.broker_id)

    # ---- plumbing ----------------------------------------------------------------------------------
    def post(self, kind: str, data: Any = None, reply: Callable[[Any], None] | None = None) -> None:
        """Queue an event (from the trio thread)."""
        self._send.send_nowait(Event(kind, data, reply))

    def _post_from_kazoo(self, handle: _WatchHandle, kind: str, data: Any) -> bool:
        """A kazoo watch callback (kazoo thread): hand the notification to the event loop."""
        if not handle.active:
            return False
        try:
            self._token.run_sync_soon(lambda: self.post(kind, data))
        except trio.RunFinishedError:
            return False
        return True

    async def request(self, kind: str, data: Any, timeout_s: float = 30.0) -> Any:
        """Post an event and wait for its reply (CreateTopics, ControlledShutdown, ...)."""
        send, receive = trio.open_memory_channel(1)
        self.post(kind, data, send.send_nowait)
        with trio.fail_after(timeout_s):
            return await receive.receive()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            handle = _WatchHandle()
            await trio.to_thread.run_sync(
                lambda: self.zk._kazoo.DataWatch(
                    zkdata.CONTROLLER,
                    lambda data, stat, event=None: self._post_from_kazoo(
                        handle, "controller_changed", None if data is None else zkdata.decode_controller(data)
                    ),
                )
            )
            task_status.started()
            async for event in self._receive:
                try:
                    await self._process(event)
                except Exception:
                    log.exception("controller event %s failed", event.kind)
                    if event.reply is not None:
                        event.reply(None)

    async def _process(self, event: Event) -> None:
        kind = event.kind
        if kind == "controller_changed":
            await self._on_controller_changed(event.data)
        elif kind == "elect":
            await self._elect()
        elif kind == "resign":
            self._resign("ZooKeeper session lost")
        elif event.reply is not None and not self.active:
            event.reply(ErrorCode.NOT_CONTROLLER)
        elif not self.active:
            return
        elif kind == "broker_change":
            await self._on_broker_change(event.data)
        elif kind == "topic_change":
            await self._on_topic_change(event.data)
        elif kind == "delete_topics":
            await self._on_delete_topics_notification(event.data)
        elif kind == "isr_change":
            await self._on_isr_change(event.data)
        elif kind == "preferred_election":
            await self._on_preferred_election_notification(event.data)
        elif kind == "create_topics":
            event.reply(await self._create_topics(event.data))
        elif kind == "delete_topics_request":
            event.reply(await self._delete_topics(event.data))
        elif kind == "controlled_shutdown":
            event.reply(await self._controlled_shutdown(*event.data))
        elif kind == "elect_preferred":
            event.reply(await self._preferred_election(event.data))
        elif kind == "rebalance":
            await self._auto_rebalance()

    # ---- election ----------------------------------------------------------------------------------
    async def _on_controller_changed(self, controller_id: int | None) -> None:
        if controller_id is None:
            await self._elect()
        elif controller_id != self.broker_id and self.active:
            self._resign(f"broker {controller_id} is the controller now")

    async def _elect(self) -> None:
        try:
            await self.zk.create(zkdata.CONTROLLER, zkdata.encode_controller(self.broker_id), ephemeral=True)
        except NodeExistsError:
            found = await self.zk.get_or_none(zkdata.CONTROLLER)
            if found is not None and zkdata.decode_controller(found[0]) != self.broker_id and self.active:
                self._resign("another broker won the election")
            elif found is not None and zkdata.decode_controller(found[0]) == self.broker_id and not self.active:
                await self._on_failover()  # our own node, e.g. after a session moved
            return
        await self._on_failover()

    def _resign(self, why: str) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller: %s", self.broker_id, why)
        self.active = False
        self.channels = None
        for handle in self._watches:
            handle.active = False
        self._watches = []
        if self._active_scope is not None:
            self._active_scope.cancel()
        self.ctx = ControllerContext()

    async def _increment_epoch(self) -> None:
        found = await self.zk.get_or_none(zkdata.CONTROLLER_EPOCH)
        if found is None:
            try:
                await self.zk.create(zkdata.CONTROLLER_EPOCH, b"1")
                stat = await self.zk.exists(zkdata.CONTROLLER_EPOCH)
                self.ctx.epoch, self.ctx.epoch_zk_version = 1, stat.version
                return
            except NodeExistsError:
                found = await self.zk.get(zkdata.CONTROLLER_EPOCH)
        epoch = int(found[0]) + 1
        stat = await self.zk.set(zkdata.CONTROLLER_EPOCH, str(epoch).encode(), version=found[1].version)
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch, stat.version

    async def _on_failover(self) -> None:
        self.ctx = ControllerContext()
        try:
            await self._increment_epoch()
        except BadVersionError:
            log.info("lost the race to increment the controller epoch")
            return
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.ctx.epoch)
        scope = self._active_scope = trio.CancelScope()
        self._nursery.start_soon(self._active_tasks, scope)
        for path, kind in (
            (zkdata.BROKER_IDS, "broker_change"),
            (zkdata.TOPICS, "topic_change"),
            (zkdata.DELETE_TOPICS, "delete_topics"),
            (zkdata.ISR_CHANGE_NOTIFICATION, "isr_change"),
        ):
            await self._watch_children(path, kind)
        handle = _WatchHandle()
        self._watches.append(handle)
        await trio.to_thread.run_sync(
            lambda: self.zk._kazoo.DataWatch(
                zkdata.PREFERRED_REPLICA_ELECTION,
                lambda data, stat, event=None: self._post_from_kazoo(
                    handle, "preferred_election", None if data is None else zkdata.decode_partitions(data)
                ),
            )
        )
        started = trio.current_time()
        await self._load_context()
        log.info(
            "controller context loaded: %d brokers, %d partitions in %.0f ms",
            len(self.ctx.live_brokers),
            len(self.ctx.leadership),
            (trio.current_time() - started) * 1000,
        )
        # Announce everything: metadata to all, roles to every replica, then elect missing leaders.
        live = self.ctx.live_ids
        for tp in self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            self.ctx.partition_states[tp] = NEW if state is None else (ONLINE if state.leader in live else OFFLINE)
            if state is not None:
                self.batch.add_leader_and_isr(
                    [r for r in self.ctx.replicas(tp) if r in live], tp, state, self.ctx.replicas(tp)
                )
            self.batch.add_update_metadata(live, tp, state, self.ctx.replicas(tp), live)
        self.batch.update_metadata_brokers.update(live)
        self._send_batch()
        log.info("controller state announced after %.0f ms", (trio.current_time() - started) * 1000)
        await self._elect_leaders([tp for tp, s in self.ctx.partition_states.items() if s in (NEW, OFFLINE)])
        log.info("controller failover done after %.0f ms", (trio.current_time() - started) * 1000)
        deleting = await self.zk.get_children(zkdata.DELETE_TOPICS)
        if deleting:
            await self._on_delete_topics_notification(deleting)

    async def _active_tasks(self, scope: trio.CancelScope) -> None:
        with scope:
            async with trio.open_nursery() as nursery:
                self.channels = BrokerChannels(nursery, f"controller-{self.broker_id}")
                if self.config["auto.leader.rebalance.enable"]:
                    nursery.start_soon(self._rebalance_timer)
                await trio.sleep_forever()

    async def _rebalance_timer(self) -> None:
        while True:
            await trio.sleep(self.config["leader.imbalance.check.interval.seconds"])
            self.post("rebalance")

    async def _watch_children(self, path: str, kind: str) -> None:
        handle = _WatchHandle()
        self._watches.append(handle)
        await self.zk.ensure_path(path)
        await trio.to_thread.run_sync(
            lambda: self.zk._kazoo.ChildrenWatch(
                path, lambda children: self._post_from_kazoo(handle, kind, sorted(children))
            )
        )

    async def _load_context(self) -> None:
        for child in await self.zk.get_children(zkdata.BROKER_IDS):
            await self._load_broker(int(child))
        for topic in await self.zk.get_children(zkdata.TOPICS):
            await self._load_topic(topic)
        while self.channels is None:
            await trio.sleep(0)
        for broker_id, reg in self.ctx.live_brokers.items():
            self.channels.add_broker(broker_id, reg.endpoints[0][1], reg.endpoints[0][2])

    async def _load_broker(self, broker_id: int) -> bool:
        found = await self.zk.get_or_none(zkdata.broker_path(broker_id))
        if found is None:
            return False
        self.ctx.live_brokers[broker_id] = BrokerRegistration.decode(broker_id, found[0])
        self.ctx.broker_epochs[broker_id] = found[1].czxid
        return True

    async def _load_topic(self, topic: str) -> None:
        found = await self.zk.get_or_none(zkdata.topic_path(topic))
        if found is None:
            return
        assignment, topic_id = zkdata.decode_topic_assignment(found[0])
        self.ctx.assignments[topic] = assignment
        config = await self.zk.get_or_none(f"{zkdata.CONFIG_TOPICS}/{topic}")
        self.topic_configs.set(topic, zkdata.decode_topic_config(config[0]) if config else {})
        if topic_id is not None:
            self.ctx.topic_ids[topic] = topic_id
        indexes = list(assignment)
        states = await self.zk.get_many([zkdata.partition_state_path(topic, p) for p in indexes])
        for p, state in zip(indexes, states):
            if state is not None:
                self.ctx.leadership[(topic, p)] = LeaderIsr.decode(state[0], state[1].version)

    def _send_batch(self) -> None:
        if self.channels is not None:
            self.batch.send(
                self.channels, self.ctx.epoch, self.ctx.live_brokers, self.ctx.broker_epochs, self.ctx.topic_ids
            )

    # ---- partition state machine -------------------------------------------------------------------
    async def _write_leadership(self, tp: TopicPartition, new: LeaderIsr, create: bool) -> LeaderIsr | None:
        """Fenced write of a partition state znode; returns the stored state (with its new
        zkVersion), or None if the write lost a race (the caller re-reads)."""
        path = zkdata.partition_state_path(*tp)
        try:
            if create:
                await self.zk.ensure_path(path.rsplit("/", 1)[0])
                await self.zk.fenced_write(
                    zkdata.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, [("create", path, new.encode())]
                )
                version = 0
            else:
                (stat,) = await self.zk.fenced_write(
                    zkdata.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, [("set", path, new.encode(), new.zk_version)]
                )
                version = stat.version
        except (BadVersionError, NodeExistsError, NoNodeError) as e:
            log.info("partition state write for %s lost a race (%s); re-reading", tp, type(e).__name__)
            fenced = await self.zk.get(zkdata.CONTROLLER_EPOCH)
            if fenced[1].version != self.ctx.epoch_zk_version:
                self._resign("the controller epoch moved on")
            return None
        stored = LeaderIsr(new.leader, new.leader_epoch, new.isr, new.controller_epoch, version)
        self.ctx.leadership[tp] = stored
        return stored

    def _next_state(self, tp: TopicPartition, choose) -> tuple[LeaderIsr | None, LeaderIsr | None]:
        """(current state, the state `choose(current) -> (leader, isr) | None` asks for, with the
        leader epoch bumped; None when it declines)."""
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

    def _adopt(self, tp: TopicPartition, stored: LeaderIsr, is_new: bool) -> None:
        """A written state becomes the controller's, and LeaderAndIsr + UpdateMetadata are queued."""
        self.ctx.leadership[tp] = stored
        live = self.ctx.live_ids
        replicas = self.ctx.replicas(tp)
        self.batch.add_leader_and_isr([r for r in replicas if r in live], tp, stored, replicas, is_new=is_new)
        self.batch.add_update_metadata(live, tp, stored, replicas, live)

    async def _change_leadership(self, tp: TopicPartition, choose) -> bool:
        """Apply `choose(current) -> (leader, isr) | None` with a leader-epoch bump, fenced and
        conditional; re-reads and retries when the znode changed under us. Queues LeaderAndIsr
        and UpdateMetadata. Returns whether the partition now has the chosen leadership."""
        for _ in range(3):
            current, new = self._next_state(tp, choose)
            if new is None:
                return False
            stored = await self._write_leadership(tp, new, create=current is None)
            if stored is not None:
                self._adopt(tp, stored, is_new=current is None)
                return True
            if not self.active:
                return False
            found = await self.zk.get_or_none(zkdata.partition_state_path(*tp))
            if found is not None:
                self.ctx.leadership[tp] = LeaderIsr.decode(found[0], found[1].version)
        return False

    async def _change_leaderships(self, changes: list[tuple[TopicPartition, Any]]) -> dict[TopicPartition, bool]:
        """`_change_leadership` for many partitions: the first attempt of every write is pipelined
        in one go (Kafka's controller batches its ZooKeeper writes the same way); a partition whose
        write lost a race takes the one-at-a-time path (re-read, retry)."""
        done = {tp: False for tp, _ in changes}
        plans = []
        for tp, choose in changes:
            current, new = self._next_state(tp, choose)
            if new is not None:
                plans.append((tp, choose, current, new))
        for topic in {tp[0] for tp, _, current, _ in plans if current is None}:
            await self.zk.ensure_path(f"{zkdata.topic_path(topic)}/partitions")
        op_lists = []
        for tp, _, current, new in plans:
            path = zkdata.partition_state_path(*tp)
            op_lists.append(
                [("create", path.rsplit("/", 1)[0], b""), ("create", path, new.encode())]
                if current is None
                else [("set", path, new.encode(), new.zk_version)]
            )
        outcomes = await self.zk.fenced_write_many(zkdata.CONTROLLER_EPOCH, self.ctx.epoch_zk_version, op_lists)
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
            if self.active:
                done[tp] = await self._change_leadership(tp, choose)
        return done

    def _unclean_allowed(self, topic: str) -> bool:
        """`unclean.leader.election.enable`: the topic's override, else the broker's."""
        return self.topic_configs.unclean_leader_election_enable(topic)

    async def _elect_leaders(self, partitions: list[TopicPartition]) -> None:
        """New/Offline -> Online with the offline (or new-partition) selector; the ZooKeeper
        writes are pipelined (`_change_leaderships`), the requests to brokers go in one batch."""
        live = self.ctx.live_ids - self.ctx.shutting_down

        def chooser(tp: TopicPartition):
            replicas = self.ctx.replicas(tp)
            unclean = self._unclean_allowed(tp[0])

            def choose(current):
                if current is None:  # a new partition: all live replicas start in sync
                    live_replicas = [r for r in replicas if r in live]
                    return (live_replicas[0], live_replicas) if live_replicas else None
                chosen = election.offline_partition_leader(replicas, list(current.isr), live, unclean)
                if chosen is not None and chosen[0] not in current.isr:
                    log.warning(
                        "UNCLEAN leader election for %s-%d: broker %d leads without being in the ISR %s; "
                        "records only the old ISR held are lost",
                        *tp,
                        chosen[0],
                        list(current.isr),
                    )
                return chosen

            return choose

        done = await self._change_leaderships([(tp, chooser(tp)) for tp in partitions])
        for tp in partitions:
            if done[tp]:
                self.ctx.set_state(tp, ONLINE)
            elif tp in self.ctx.leadership and self.ctx.leadership[tp].leader not in live:
                self.ctx.set_state(tp, OFFLINE)
                log.warning("%s-%d has no live in-sync replica: offline", *tp)
        self._send_batch()

    # ---- brokers -----------------------------------------------------------------------------------
    async def _on_broker_change(self, children: list[str]) -> None:
        now = {int(c) for c in children}
        known = self.ctx.live_ids
        dead, new = known - now, now - known
        bounced = set()
        for b in now & known:  # same id, new registration (restarted faster than we noticed)
            found = await self.zk.get_or_none(zkdata.broker_path(b))
            if found is not None and found[1].czxid != self.ctx.broker_epochs.get(b):
                bounced.add(b)
        if dead or bounced:
            await self._on_broker_failure(dead | bounced)
        if new or bounced:
            await self._on_broker_startup(new | bounced)

    async def _on_broker_failure(self, dead: set[int]) -> None:
        log.info("controller: brokers %s failed", sorted(dead))
        for b in dead:
            self.ctx.live_brokers.pop(b, None)
            self.ctx.broker_epochs.pop(b, None)
            self.ctx.shutting_down.discard(b)
            self.channels.remove_broker(b)
        live = self.ctx.live_ids
        leaderless = [tp for tp, s in self.ctx.leadership.items() if s.leader in dead]
        for tp in leaderless:
            self.ctx.set_state(tp, OFFLINE)
        await self._elect_leaders(leaderless)
        # Replicas on dead brokers leave every ISR they were in (OfflineReplica).
        shrinking = [
            tp
            for tp, state in list(self.ctx.leadership.items())
            if tp not in leaderless and set(state.isr) & dead and state.leader in live
        ]

        def shrink(cur):
            return (cur.leader, [r for r in cur.isr if r not in dead]) if cur.leader in live else None

        await self._change_leaderships([(tp, shrink) for tp in shrinking])
        for tp in self.ctx.all_partitions():
            self.batch.add_update_metadata(live, tp, self.ctx.leadership.get(tp), self.ctx.replicas(tp), live)
        self.batch.update_metadata_brokers.update(live)
        self._send_batch()

    async def _on_broker_startup(self, new: set[int]) -> None:
        for b in new:
            if await self._load_broker(b):
                reg = self.ctx.live_brokers[b]
                self.channels.add_broker(b, reg.endpoints[0][1], reg.endpoints[0][2])
        live = self.ctx.live_ids
        log.info("controller: brokers %s started (live %s)", sorted(new & live), sorted(live))
        for tp in self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            self.batch.add_update_metadata(live, tp, state, self.ctx.replicas(tp), live)
            on_new = [r for r in self.ctx.replicas(tp) if r in new & live]
            if state is not None and on_new:
                self.batch.add_leader_and_isr(on_new, tp, state, self.ctx.replicas(tp))
        self.batch.update_metadata_brokers.update(live)
        self._send_batch()
        await self._elect_leaders([tp for tp, s in self.ctx.partition_states.items() if s in (NEW, OFFLINE)])

    # ---- topics ------------------------------------------------------------------------------------
    async def _on_topic_change(self, children: list[str]) -> None:
        new = [t for t in children if t not in self.ctx.assignments]
        for topic in new:
            await self._load_topic(topic)
        created = [tp for t in new for tp in self.ctx.partitions_of(t) if tp not in self.ctx.leadership]
        for tp in created:
            self.ctx.set_state(tp, NEW)
        if created:
            await self._elect_leaders(created)
        elif new:
            live = self.ctx.live_ids
            for tp in [tp for t in new for tp in self.ctx.partitions_of(t)]:
                self.batch.add_update_metadata(live, tp, self.ctx.leadership.get(tp), self.ctx.replicas(tp), live)
            self._send_batch()

    async def _create_topics(self, body) -> list[dict]:
        results = []
        live = sorted(self.ctx.live_ids)
        for t in body.topics:
            result = {
                "name": t.name,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "num_partitions": -1,
                "replication_factor": -1,
                "topic_id": ZERO_UUID,
            }
            try:
                configs = {c.name: c.value for c in t.configs}
                manual = {a.partition_index: list(a.broker_ids) for a in t.assignments}
                partitions = t.num_partitions if t.num_partitions != -1 else self.config["num.partitions"]
                rf = t.replication_factor if t.replication_factor != -1 else self.config["default.replication.factor"]
                if t.name in self.ctx.assignments:
                    raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} already exists")
                assignment = plan_topic(t.name, partitions, rf, live, configs, manual)
                result.update(num_partitions=len(assignment), replication_factor=len(assignment[0]))
                if not body.validate_only:
                    topic_id = await write_topic(self.zk, t.name, assignment, configs)
                    result["topic_id"] = topic_id
                    await self._on_topic_change(list(self.ctx.assignments) + [t.name])
            except TopicError as e:
                result.update(error_code=e.code, error_message=str(e))
            results.append(result)
        return results

    async def _delete_topics(self, names: list[str]) -> list[tuple[str, ErrorCode]]:
        results = []
        for name in names:
            if name not in self.ctx.assignments:
                results.append((name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                await self.zk.create(f"{zkdata.DELETE_TOPICS}/{name}", b"", makepath=True)
            except NodeExistsError:
                pass
            await self._delete_topic(name)
            results.append((name, ErrorCode.NONE))
        return results

    async def _on_delete_topics_notification(self, children: list[str]) -> None:
        for name in children:
            if name in self.ctx.assignments:
                await self._delete_topic(name)
            else:
                await self.zk.delete(f"{zkdata.DELETE_TOPICS}/{name}", recursive=True)

    async def _delete_topic(self, name: str) -> None:
        """Kafka's TopicDeletionManager, simplified: every live replica gets StopReplica with
        delete, every broker UpdateMetadata with the LeaderDuringDelete marker, then the topic's
        znodes go. Replicas on brokers that are down keep their files until they are deleted by
        hand (Kafka would wait for them)."""
        live = self.ctx.live_ids
        for tp in self.ctx.partitions_of(name):
            state = self.ctx.leadership.get(tp)
            self.batch.add_stop_replica(
                [r for r in self.ctx.replicas(tp) if r in live], tp, delete=True, leader_epoch=-2
            )
            self.batch.add_update_metadata(
                live, tp, state or LeaderIsr(-1, 0, (), self.ctx.epoch), self.ctx.replicas(tp), live, deleting=True
            )
        self._send_batch()
        for tp in self.ctx.partitions_of(name):
            self.ctx.set_state(tp, OFFLINE)
            self.ctx.set_state(tp, NON_EXISTENT)
        self.ctx.remove_topic(name)
        self.topic_configs.remove(name)
        for path in (zkdata.topic_path(name), f"{zkdata.CONFIG_TOPICS}/{name}", f"{zkdata.DELETE_TOPICS}/{name}"):
            try:
                await self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass
        log.info("controller: deleted topic %s", name)

    # ---- ISR changes, preferred leaders, controlled shutdown ----------------------------------------
    async def _on_isr_change(self, children: list[str]) -> None:
        changed = set()
        for child in children:
            path = f"{zkdata.ISR_CHANGE_NOTIFICATION}/{child}"
            found = await self.zk.get_or_none(path)
            if found is not None:
                changed.update(zkdata.decode_partitions(found[0]))
                await self.zk.delete(path)
        live = self.ctx.live_ids
        for tp in changed:
            found = await self.zk.get_or_none(zkdata.partition_state_path(*tp))
            if found is not None and tp[0] in self.ctx.assignments:
                self.ctx.leadership[tp] = LeaderIsr.decode(found[0], found[1].version)
                self.batch.add_update_metadata(live, tp, self.ctx.leadership[tp], self.ctx.replicas(tp), live)
        if changed:
            self._send_batch()

    async def _on_preferred_election_notification(self, partitions) -> None:
        """/admin/preferred_replica_election (written by admin tools): elect, then remove it."""
        if partitions is None:
            return
        results = await self._preferred_election([tp for tp in partitions if tp[0] in self.ctx.assignments])
        log.info("controller: preferred replica election %s", {f"{t}-{p}": c.name for (t, p), c in results.items()})
        try:
            await self.zk.delete(zkdata.PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            pass

    async def _preferred_election(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ErrorCode]:
        """Move leadership to each partition's first assigned replica where it is live and in the
        ISR. `None` means every partition."""
        results = {}
        live = self.ctx.live_ids - self.ctx.shutting_down
        for tp in partitions if partitions is not None else self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            replicas = self.ctx.replicas(tp)
            if state is None or not replicas:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader == replicas[0]:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            elif await self._change_leadership(
                tp, lambda cur, r=replicas: election.preferred_replica_leader(r, list(cur.isr), live)
            ):
                results[tp] = ErrorCode.NONE
            else:
                results[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._send_batch()
        return results

    async def _auto_rebalance(self) -> None:
        """Kafka's imbalance check: per preferred leader, the share of its partitions it does not
        lead; above leader.imbalance.per.broker.percentage (10%) triggers preferred election."""
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in self.ctx.all_partitions():
            replicas = self.ctx.replicas(tp)
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        todo = []
        for broker, tps in by_preferred.items():
            if broker not in self.ctx.live_ids or broker in self.ctx.shutting_down:
                continue
            off = [tp for tp in tps if tp in self.ctx.leadership and self.ctx.leadership[tp].leader != broker]
            if len(off) / len(tps) > 0.10:
                todo += off
        if todo:
            log.info("controller: rebalancing leadership of %d partitions to their preferred replicas", len(todo))
            await self._preferred_election(todo)

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership away from a broker that is shutting down and take it out of the ISRs;
        returns the partitions it still leads (those with no other ISR member)."""
        if broker_id not in self.ctx.live_brokers:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < self.ctx.broker_epochs.get(broker_id, -1):
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.ctx.shutting_down.add(broker_id)
        live = self.ctx.live_ids
        for tp in self.ctx.partitions_on(broker_id):
            state = self.ctx.leadership.get(tp)
            if state is None or len(self.ctx.replicas(tp)) < 2:
                continue
            if state.leader == broker_id:
                await self._change_leadership(
                    tp,
                    lambda cur, r=self.ctx.replicas(tp): election.controlled_shutdown_leader(
                        r, list(cur.isr), live, self.ctx.shutting_down
                    ),
                )
            elif broker_id in state.isr:
                await self._change_leadership(
                    tp,
                    lambda cur: (
                        (cur.leader, [r for r in cur.isr if r != broker_id])
                        if cur.leader in live and len(cur.isr) > 1
                        else None
                    ),
                )
        self._send_batch()
        remaining = [tp for tp, s in self.ctx.leadership.items() if s.leader == broker_id]
        log.info(
            "controller: controlled shutdown of broker %d leaves %d partitions led by it", broker_id, len(remaining)
        )
        return ErrorCode.NONE, remaining
