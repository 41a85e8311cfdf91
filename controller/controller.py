"""The controller component every broker runs; exactly one is active (Kafka `KafkaController`,
ZooKeeper mode).

Election: create the ephemeral /controller znode and increment /controller_epoch in one multi-op,
conditional on the epoch's zkVersion; the winner becomes active (`_on_failover`). When /controller
goes away every broker tries again; an active controller that sees another id there resigns (its
watches are dropped and its request channels closed).

Everything the controller does happens in one trio task consuming one event channel of typed
events (`controller.events`): ZooKeeper watch notifications (delivered on the trio thread by
`zk.client`'s watches), requests forwarded by the broker (DeleteTopics,
ControlledShutdown, ElectLeaders), periodic rebalance checks. One table maps each event type to its
handler; posting a type that is not in it raises. So the context needs no locks. Partition states
and leadership writes live in `controller.partition_state_machine`, topic deletion in
`controller.topic_deletion`; both are made anew with the context at every failover. Every partition-state write is fenced by /controller_epoch's zkVersion (a multi-op
check), and every request to brokers carries the controller epoch, so a deposed controller
(a zombie) can neither write ZooKeeper nor move a broker.

Leader changes bump the leader epoch, are written to the partition state znode conditionally on
its zkVersion, then sent as LeaderAndIsr to the replicas and UpdateMetadata to every live broker.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from controller import election
from controller import events as ev
from controller.channel import BrokerChannels, RequestBatch
from controller.config import ControllerConfig
from controller.context import ControllerContext, Reassignment
from controller.partition_state_machine import NEW, OFFLINE, ONLINE, Chooser, PartitionStateMachine, set_state
from controller.reassignment import ReassignmentManager
from controller.topic_deletion import TopicDeletionManager
from controller.topics import TopicError, check_partition_count, plan_new_partitions
from metrics.stats import ControllerStats
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from protocol.types import ZERO_UUID
from storage.topic_configs import TopicConfigs
from zk import znodes
from zk.client import SESSION_ERRORS, BadVersionError, NodeExistsError, NoNodeError, Watch, ZkClient
from zk.znodes import BrokerRegistration, LeaderIsr

log = logging.getLogger(__name__)


#: how long a broker whose failover failed waits before giving /controller up (seconds)
FAILED_FAILOVER_BACKOFF_S = 0.5
SLOW_EVENT_S = 1.0  # an event that holds the event loop longer is logged with its time
#: events whose handler reads its notifications from ZooKeeper itself: one queued at a time
COALESCED_EVENTS = (ev.IsrChangeNotification, ev.LogDirEventNotification)


class UnknownControllerEvent(Exception):
    """An event type with no handler in the dispatch table (a programming error)."""


class KafkaController:
    def __init__(
        self,
        config: ControllerConfig,
        zk: ZkClient,
        topic_configs: TopicConfigs,
        on_controller_known: Callable[[int], None] | None = None,
    ):
        """`on_controller_known(broker id, -1 for none)` is called as soon as /controller changes
        (the broker's metadata names that controller), before the event loop gets to it."""
        self.config = config
        self.on_controller_known = on_controller_known
        self.broker_id = config.broker_id
        self.zk = zk
        self.topic_configs = topic_configs
        self.active = False
        #: the active controller's context is loaded and announced (live brokers, assignments):
        #: what the admin requests it serves outside its event loop may rely on
        self.ready = False
        #: set (and renewed) when `ready` turns true, the controller resigns or the live brokers change
        self._settled = trio.Event()
        self.stats = ControllerStats()  # leader elections while active, for metrics/
        self._send, self._receive = trio.open_memory_channel(1 << 16)
        self._active_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None
        self._watches: list[Watch] = []
        self._queued_notifications: set[type] = set()  # COALESCED_EVENTS waiting in the queue
        self.channels: BrokerChannels | None = None
        self.batch = RequestBatch(self.broker_id)
        self._new_context()
        #: event type -> handler; `_process` refuses any other type
        self._handlers: dict[type, Callable[[Any], Awaitable[Any]]] = {
            ev.ControllerChange: lambda e: self._on_controller_changed(e.controller_id),
            ev.Reelect: lambda e: self._elect(),
            ev.Expire: self._on_expire,
            ev.BrokerChange: lambda e: self._on_broker_change(list(e.children)),
            ev.TopicChange: lambda e: self._on_topic_change(list(e.children)),
            ev.TopicDeletion: lambda e: self.topic_deletion.on_notification(list(e.children)),
            ev.IsrChangeNotification: lambda e: self._on_isr_change(),
            ev.LogDirEventNotification: lambda e: self._on_log_dir_events(),
            ev.LeaderAndIsrResponseReceived: lambda e: self._on_leader_and_isr_response(e.broker_id, e.response),
            ev.ReplicaLeaderElection: lambda e: self._on_preferred_election_notification(e.partitions),
            ev.AutoPreferredReplicaLeaderElection: lambda e: self._auto_rebalance(),
            ev.DeleteTopics: lambda e: self.topic_deletion.delete_topics(list(e.names)),
            ev.ControlledShutdown: lambda e: self._controlled_shutdown(e.broker_id, e.broker_epoch),
            ev.CreatePartitions: lambda e: self._create_partitions(e.body),
            ev.AlterPartitionReassignments: lambda e: self.reassignment.alter(
                {tp: None if target is None else list(target) for tp, target in e.requests}
            ),
            ev.ListPartitionReassignments: self._list_reassignments,
            ev.LegacyReassignment: lambda e: self.reassignment.on_legacy_request(e.data),
            ev.ElectUncleanLeaders: lambda e: self._unclean_election(
                None if e.partitions is None else list(e.partitions)
            ),
            ev.ElectPreferredLeaders: lambda e: self._preferred_election(
                None if e.partitions is None else list(e.partitions)
            ),
        }

    def _new_context(self) -> None:
        """A fresh context, and the state machine and deletion manager working on it."""
        self.ctx = ControllerContext()
        self.partition_state_machine = PartitionStateMachine(
            self.zk,
            self.ctx,
            self.batch,
            self.topic_configs,
            is_active=lambda: self.active,
            on_fenced=self._resign,
            stats=self.stats,
        )
        self.topic_deletion = TopicDeletionManager(self.zk, self.ctx, self.batch, self.topic_configs, self._send_batch)
        self.reassignment = ReassignmentManager(
            self.zk, self.ctx, self.batch, self.partition_state_machine, self._send_batch
        )

    # ---- plumbing ----------------------------------------------------------------------------------
    @property
    def event_queue_size(self) -> int:
        """Events waiting for the controller's event loop (Kafka's ControllerEventManager
        EventQueueSize)."""
        return self._receive.statistics().current_buffer_used

    def post(self, event: ev.ControllerEvent) -> None:
        """Queue an event (from the trio thread); raises UnknownControllerEvent for an event type
        the controller has no handler for."""
        if type(event) not in self._handlers:
            raise UnknownControllerEvent(f"no handler for controller event {event!r}")
        self._send.send_nowait(event)

    async def request(self, make_event: Callable[[ev.Reply], ev.ControllerEvent], timeout_s: float = 30.0) -> Any:
        """Post the event `make_event(reply)` and wait for its reply (CreatePartitions,
        ControlledShutdown, ...); raises trio.TooSlowError after `timeout_s`."""
        send, receive = trio.open_memory_channel(1)
        self.post(make_event(send.send_nowait))
        with trio.fail_after(timeout_s):
            return await receive.receive()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self.zk.watch_data(znodes.CONTROLLER, self._controller_znode_changed)
            task_status.started()
            async for event in self._receive:
                started = trio.current_time()
                try:
                    await self._process(event)
                    took = trio.current_time() - started
                    if took > SLOW_EVENT_S:
                        log.info("controller event %s took %.1f s", type(event).__name__, took)
                except Exception:
                    log.exception("controller event %s failed", type(event).__name__)
                    if getattr(event, "reply", None) is not None:
                        event.reply(None)

    def _controller_znode_changed(self, data: bytes | None) -> None:
        """The /controller watch (on the trio thread): `on_controller_known` hears it at once,
        the event loop in turn."""
        controller_id = znodes.controller_id_of(data)
        if self.on_controller_known is not None:
            self.on_controller_known(controller_id)
        self.post(ev.ControllerChange(None if controller_id < 0 else controller_id))

    async def _process(self, event: ev.ControllerEvent) -> None:
        self._queued_notifications.discard(type(event))  # a watch firing from now on queues anew
        handler = self._handlers[type(event)]
        reply = getattr(event, "reply", None)
        if event.needs_active and not self.active:
            if reply is not None:
                reply(ErrorCode.NOT_CONTROLLER)
            return
        result = await handler(event)
        if reply is not None:
            reply(result)

    # ---- election ----------------------------------------------------------------------------------
    async def _on_controller_changed(self, controller_id: int | None) -> None:
        if controller_id is None:
            await self._elect()
        elif controller_id != self.broker_id and self.active:
            self._resign(f"broker {controller_id} is the controller now")
        elif controller_id == self.broker_id and not self.active:
            await self._elect()  # /controller names us: take it up if it is our session's, else wait

    async def _elect(self) -> None:
        """Try to become the controller. A ZooKeeper failure meanwhile (connection loss, the
        session expiring) ends the attempt: the next session's Reelect, or the /controller
        watch, tries again. A failover that fails half-way resigns and gives /controller up, so
        that the election runs again (Kafka's `triggerControllerMove`)."""
        try:
            try:
                epoch = await self._register()
            except NodeExistsError:
                found = await self.zk.get_or_none(znodes.CONTROLLER)
                if found is not None and znodes.controller_id_of(found[0]) != self.broker_id and self.active:
                    self._resign("another broker won the election")
                elif (
                    found is not None
                    and znodes.controller_id_of(found[0]) == self.broker_id
                    and found[1].ephemeral_owner == self.zk.session_id
                    and not self.active
                ):
                    # our session's node, whose failover did not run: the multi-op that created it
                    # raised the epoch too, and nobody has raised it since
                    data, stat = await self.zk.get(znodes.CONTROLLER_EPOCH)
                    await self._failover_or_move((int(data), stat.version))
                return
            except BadVersionError:
                log.info("lost the race to increment the controller epoch")
                return
        except SESSION_ERRORS as e:
            log.warning("controller election interrupted by ZooKeeper (%s); retried with the next session", e)
            return
        await self._failover_or_move(epoch)

    async def _failover_or_move(self, epoch: tuple[int, int]) -> None:
        """Fail over at `epoch` ((controller epoch, its zkVersion), raised with /controller by
        `_register`); if that fails, give /controller up (ours, it would otherwise name a broker
        that is not the controller until our session ends, and every client would be told
        NOT_CONTROLLER meanwhile)."""
        try:
            await self._on_failover(epoch)
        except Exception as e:
            if self.ready:  # the context is loaded and announced: what failed after (deletions,
                log.exception("resuming work after the failover failed")  # reassignments) is retried
                return  # by their own notifications, as any event's failure
            log.exception("controller failover failed; resigning and giving up /controller")
            self._resign(f"failover failed: {type(e).__name__}")
        if not self.active:
            await trio.sleep(FAILED_FAILOVER_BACKOFF_S)  # a failure that repeats does not spin the election
            try:
                stat = await self.zk.owned(znodes.CONTROLLER)
                if stat is not None:
                    await self.zk.delete(znodes.CONTROLLER, stat.version)
            except Exception as e:  # the session is gone too: its ephemeral /controller with it
                log.warning("could not give up /controller: %s", e)

    def _settle(self) -> None:
        self._settled.set()
        self._settled = trio.Event()

    async def wait_settled(self) -> None:
        """Return once no failover is in progress: not active, or active and ready (bound it
        with a cancel scope)."""
        while self.active and not self.ready:
            await self._settled.wait()

    async def wait_live(self, broker_id: int) -> None:
        """Return once `broker_id` is among the active controller's live brokers, or this broker
        is not the active controller (bound it with a cancel scope): a broker serves requests as
        soon as it has registered, a moment before the controller has processed that."""
        while self.active and broker_id not in self.ctx.live_ids:
            await self._settled.wait()

    def _resign(self, why: str) -> None:
        if not self.active:
            return
        log.info("broker %d resigns as controller: %s", self.broker_id, why)
        self.active = self.ready = False
        self._settle()
        self.channels = None
        for watch in self._watches:
            watch.stop()
        self._watches = []
        if self._active_scope is not None:
            self._active_scope.cancel()
        self._new_context()

    async def _on_expire(self, event: ev.Expire) -> None:
        self._resign("ZooKeeper session lost")

    async def _register(self) -> tuple[int, int]:
        """Create /controller and raise /controller_epoch by one in one multi-op (Kafka's
        `registerControllerAndIncrementControllerEpoch`; a missing /controller_epoch is made at
        0 first, so the first controller's epoch is 1). Returns (epoch, its zkVersion); raises
        NodeExistsError or BadVersionError when another broker is, or became, the controller."""
        found = await self.zk.get_or_none(znodes.CONTROLLER_EPOCH)
        if found is None:
            try:
                await self.zk.create(znodes.CONTROLLER_EPOCH, b"0")
            except NodeExistsError:
                pass
            found = await self.zk.get(znodes.CONTROLLER_EPOCH)
        epoch = int(found[0]) + 1
        stat = await self.zk.register_controller(znodes.encode_controller(self.broker_id), epoch, found[1].version)
        return epoch, stat.version

    async def _on_failover(self, epoch: tuple[int, int]) -> None:
        self._new_context()
        self.ctx.epoch, self.ctx.epoch_zk_version = epoch
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.ctx.epoch)
        scope = self._active_scope = trio.CancelScope()
        assert self._nursery is not None, "run() starts the controller"
        self.channels = await self._nursery.start(self._active_tasks, scope)
        for path, event in (
            (znodes.BROKER_IDS, ev.BrokerChange),
            (znodes.TOPICS, ev.TopicChange),
            (znodes.DELETE_TOPICS, ev.TopicDeletion),
            (znodes.ISR_CHANGE_NOTIFICATION, ev.IsrChangeNotification),
            (znodes.LOG_DIR_EVENT_NOTIFICATION, ev.LogDirEventNotification),
        ):
            self._watches.append(await self.zk.watch_children(path, functools.partial(self._post_children, event)))
        self._watches.append(
            await self.zk.watch_data(
                znodes.PREFERRED_REPLICA_ELECTION,
                lambda data: self.post(
                    ev.ReplicaLeaderElection(None if data is None else tuple(znodes.decode_partitions(data)))
                ),
            )
        )
        self._watches.append(
            await self.zk.watch_data(znodes.REASSIGN_PARTITIONS, lambda data: self.post(ev.LegacyReassignment(data)))
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
        await self._remove_dead_replicas_from_isrs()
        self._send_batch()
        log.info("controller failover done after %.0f ms", (trio.current_time() - started) * 1000)
        self.ready = True
        self._settle()
        deleting = await self.zk.get_children(znodes.DELETE_TOPICS)
        if deleting:
            await self.topic_deletion.on_notification(deleting)
        await self.reassignment.resume()

    def _post_children(self, event_type: type, children: list[str]) -> None:
        """A children watch fired. Notification events (ISR changes, log dir events) are
        coalesced: while one waits in the queue another adds nothing, since its handler reads
        the notifications present when it runs. A burst of ISR changes fires the watch once per
        notification, and each event queued behind the others delayed everything after it
        (seen: a restarted broker's BrokerChange waited 54 s behind them)."""
        if event_type in COALESCED_EVENTS:
            if event_type in self._queued_notifications:
                return
            self._queued_notifications.add(event_type)
        self.post(event_type(tuple(children)))

    async def _active_tasks(self, scope: trio.CancelScope, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """What runs while this broker is the active controller: the request channels to brokers
        (handed to `task_status.started`) and the rebalance timer; `scope` ends them on resignation."""
        with scope:
            async with trio.open_nursery() as nursery:
                channels = BrokerChannels(nursery, f"controller-{self.broker_id}", self.config.client_security)
                if self.config.auto_leader_rebalance_enable:
                    nursery.start_soon(self._rebalance_timer)
                task_status.started(channels)
                await trio.sleep_forever()

    async def _rebalance_timer(self) -> None:
        while True:
            await trio.sleep(self.config.leader_imbalance_check_interval_seconds)
            self.post(ev.AutoPreferredReplicaLeaderElection())

    async def _load_context(self) -> None:
        for child in await self.zk.get_children(znodes.BROKER_IDS):
            await self._load_broker(int(child))
        for topic in await self.zk.get_children(znodes.TOPICS):
            await self._load_topic(topic)
        for broker_id, reg in self.ctx.live_brokers.items():
            self._active_channels().add_broker(broker_id, *reg.endpoint_for(self.config.controller_listener))

    async def _load_broker(self, broker_id: int) -> bool:
        found = await self.zk.get_or_none(znodes.broker_path(broker_id))
        if found is None:
            return False
        self.ctx.live_brokers[broker_id] = BrokerRegistration.decode(broker_id, found[0])
        self.ctx.broker_epochs[broker_id] = found[1].czxid
        return True

    async def _load_topic(self, topic: str) -> None:
        found = await self.zk.get_or_none(znodes.topic_path(topic))
        if found is None:
            return
        assignment, topic_id = znodes.decode_topic_assignment(found[0])
        self.ctx.assignments[topic] = assignment
        adding, removing = znodes.decode_reassignment_state(found[0])
        for p in set(adding) | set(removing):
            if p in assignment:
                target = [r for r in assignment[p] if r not in removing.get(p, [])]
                self.ctx.reassignments[(topic, p)] = Reassignment(target, adding.get(p, []), removing.get(p, []))
        config = await self.zk.get_or_none(f"{znodes.CONFIG_TOPICS}/{topic}")
        self.topic_configs.set(topic, znodes.decode_topic_config(config[0]) if config else {})
        if topic_id is not None:
            self.ctx.topic_ids[topic] = topic_id
        indexes = list(assignment)
        states = await self.zk.get_many([znodes.partition_state_path(topic, p) for p in indexes])
        for p, state in zip(indexes, states):
            if state is not None:
                self.ctx.leadership[(topic, p)] = LeaderIsr.decode(state[0], state[1].version)

    def _active_channels(self) -> BrokerChannels:
        if self.channels is None:
            raise RuntimeError("request channels exist only while this broker is the active controller")
        return self.channels

    def _send_batch(self) -> None:
        if self.channels is not None:
            self.batch.send(
                self.channels,
                self.ctx.epoch,
                self.ctx.live_brokers,
                self.ctx.broker_epochs,
                self.ctx.topic_ids,
                on_response=self._leader_and_isr_answered,
                inter_broker_listener=self.config.inter_broker_listener_name,
            )

    def _leader_and_isr_answered(self, broker_id: int, response: Any) -> None:
        """A LeaderAndIsr answer (on the trio thread, from a channel's sender): one naming a
        KAFKA_STORAGE_ERROR goes to the event loop, where offline replicas are handled."""
        errors = [p for t in response.get("topics", ()) for p in t.partition_errors]
        errors += response.get("partition_errors", [])
        if self.active and any(p.error_code == ErrorCode.KAFKA_STORAGE_ERROR for p in errors):
            self.post(ev.LeaderAndIsrResponseReceived(broker_id, response))

    async def _elect_leaders(self, partitions: list[TopicPartition]) -> None:
        """New/Offline partitions -> Online (`PartitionStateMachine.elect_leaders`), then send."""
        await self.partition_state_machine.elect_leaders(partitions)
        self._send_batch()

    async def _change_leadership(self, tp: TopicPartition, choose: Chooser) -> bool:
        return await self.partition_state_machine.change_leadership(tp, choose)

    def _update_metadata_everywhere(self, partitions: list[TopicPartition], *, all_brokers: bool = False) -> None:
        """Queue UpdateMetadata for `partitions` to every live broker (`all_brokers`: also the
        live broker list to every live broker, even with no partition), then send the batch."""
        live = self.ctx.live_ids
        for tp in partitions:
            self.batch.add_update_metadata(live, tp, self.ctx.leadership.get(tp), self.ctx.replicas(tp), live)
        if all_brokers:
            self.batch.update_metadata_brokers.update(live)
        self._send_batch()

    # ---- brokers -----------------------------------------------------------------------------------
    async def _on_broker_change(self, children: list[str]) -> None:
        """BrokerChange: compare the registrations with the live brokers. /brokers/ids is read
        now, as Kafka's `processBrokerChange` does; the watch's own list is only the fallback
        when ZooKeeper cannot be read. A queued notification's list can be older than the context
        (loaded later, from a fresher read) or than a registration whose own notification did not
        come: applied as it was, brokers that started together were seen to fail, and one stayed
        out of the live set (CreateTopics then refused replication factor 3)."""
        try:
            children = await self.zk.get_children(znodes.BROKER_IDS)
        except SESSION_ERRORS as e:
            log.warning("controller: reading %s failed (%s); using the notification's list", znodes.BROKER_IDS, e)
        now = {int(c) for c in children}
        known = self.ctx.live_ids
        dead, new = known - now, now - known
        bounced = set()
        for b in now & known:  # same id, new registration (restarted faster than we noticed)
            found = await self.zk.get_or_none(znodes.broker_path(b))
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
            self.ctx.offline_replicas.pop(b, None)
            self.ctx.shutting_down.discard(b)
            self._active_channels().remove_broker(b)
        leaderless = [tp for tp, s in self.ctx.leadership.items() if s.leader in dead]
        for tp in leaderless:
            set_state(self.ctx, tp, OFFLINE)
        await self._elect_leaders(leaderless)
        await self._remove_dead_replicas_from_isrs()
        self._update_metadata_everywhere(self.ctx.all_partitions(), all_brokers=True)
        self._settle()

    async def _remove_dead_replicas_from_isrs(self) -> None:
        """Replicas on brokers that are not live leave every ISR they are in, for partitions whose
        leader is live (Kafka's OfflineReplica transition, on a broker's failure and at failover).
        Until then every acks=-1 write to those partitions (produce, transaction markers, group
        offsets) would wait for the dead replica until its leader drops it after
        replica.lag.time.max.ms."""
        live = self.ctx.live_ids
        shrinking = [
            tp for tp, state in list(self.ctx.leadership.items()) if state.leader in live and not set(state.isr) <= live
        ]

        def shrink(cur):
            return (cur.leader, [r for r in cur.isr if r in live]) if cur.leader in live else None

        if shrinking:
            log.info("controller: removing dead replicas from the ISR of %d partitions", len(shrinking))
            await self.partition_state_machine.change_leaderships([(tp, shrink) for tp in shrinking])

    async def _on_broker_startup(self, new: set[int]) -> None:
        for b in new:
            self.ctx.offline_replicas.pop(b, None)  # a restarted broker has its log dirs back
            if await self._load_broker(b):
                reg = self.ctx.live_brokers[b]
                self._active_channels().add_broker(b, *reg.endpoint_for(self.config.controller_listener))
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
        self._settle()

    # ---- topics ------------------------------------------------------------------------------------
    async def _on_topic_change(self, children: list[str]) -> None:
        new = [t for t in children if t not in self.ctx.assignments]
        for topic in new:
            await self._load_topic(topic)
        created = [tp for t in new for tp in self.ctx.partitions_of(t) if tp not in self.ctx.leadership]
        for tp in created:
            set_state(self.ctx, tp, NEW)
        if created:
            await self._elect_leaders(created)
        elif new:
            self._update_metadata_everywhere([tp for t in new for tp in self.ctx.partitions_of(t)])

    async def _create_partitions(self, body) -> list[dict]:
        """CreatePartitions: write each topic's grown assignment to /brokers/topics/<topic> (its
        topic id kept), then bring the new partitions online as a new topic's are."""
        results = []
        counts = Counter(t.name for t in body.topics)
        planned = 0  # partitions added so far by this request (MAX_PARTITIONS_PER_REQUEST)
        for t in body.topics:
            result = {"name": t.name, "error_code": ErrorCode.NONE, "error_message": None}
            try:
                if counts[t.name] > 1:
                    raise TopicError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                current = self.ctx.assignments.get(t.name)
                if current is None:
                    raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
                check_partition_count(t.count - len(current), planned)
                manual = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
                added = plan_new_partitions(t.name, current, t.count, manual, sorted(self.ctx.live_ids))
                planned += len(added)
                if not body.validate_only:
                    await self._add_partitions(t.name, added)
            except TopicError as e:
                result.update(error_code=e.error_code, error_message=str(e))
            results.append(result)
        return results

    async def _add_partitions(self, topic: str, added: dict[int, list[int]]) -> None:
        assignment = {**self.ctx.assignments[topic], **added}
        topic_id = self.ctx.topic_ids.get(topic) or ZERO_UUID
        await self.zk.set(znodes.topic_path(topic), znodes.encode_topic_assignment(assignment, topic_id))
        self.ctx.assignments[topic] = assignment
        created = [(topic, p) for p in sorted(added)]
        for tp in created:
            set_state(self.ctx, tp, NEW)
        log.info("controller: topic %s grows to %d partitions (new %s)", topic, len(assignment), added)
        await self._elect_leaders(created)

    # ---- ISR changes, preferred leaders, controlled shutdown ----------------------------------------
    async def _take_notifications(self, parent: str) -> list[bytes]:
        """Read and delete every sequential notification znode under `parent` now (ISR changes,
        log dir events); returns their data, skipping any already gone. The children are read
        afresh rather than taken from the event, as Kafka's handlers do: the watch may have fired
        many times for one burst (one event per firing), and the first event takes them all.
        Reads and deletes are pipelined: a burst of N notifications costs a few round trips to
        ZooKeeper, not 2N one after another on the event loop."""
        paths = [f"{parent}/{child}" for child in await self.zk.get_children(parent)]
        found = await self.zk.get_many(paths)
        await self.zk.delete_many([path for path, f in zip(paths, found) if f is not None])
        return [f[0] for f in found if f is not None]

    async def _on_isr_change(self) -> None:
        self.stats.isr_change_events += 1
        changed = set()
        for data in await self._take_notifications(znodes.ISR_CHANGE_NOTIFICATION):
            changed.update(znodes.decode_partitions(data))
        refreshed = []
        known = [tp for tp in changed if tp[0] in self.ctx.assignments]
        states = await self.zk.get_many([znodes.partition_state_path(*tp) for tp in known])
        for tp, found in zip(known, states):
            if found is not None:
                self.ctx.leadership[tp] = LeaderIsr.decode(found[0], found[1].version)
                refreshed.append(tp)
        if changed:
            self._update_metadata_everywhere(refreshed)
            await self.reassignment.on_isr_change(refreshed)

    # ---- log dir failures (Kafka's LogDirEventNotification and OfflineReplica) ---------------------
    async def _on_log_dir_events(self) -> None:
        """A broker's log dir failed: send it LeaderAndIsr for every replica it has; the
        partitions it answers with KAFKA_STORAGE_ERROR are its offline replicas
        (`_on_leader_and_isr_response`)."""
        taken = await self._take_notifications(znodes.LOG_DIR_EVENT_NOTIFICATION)
        brokers = {znodes.decode_log_dir_event(data) for data in taken}
        for broker in brokers & self.ctx.live_ids:
            log.info("controller: a log dir of broker %d failed; asking for its offline replicas", broker)
            for tp in self.ctx.partitions_on(broker):
                state = self.ctx.leadership.get(tp)
                if state is not None:
                    self.batch.add_leader_and_isr([broker], tp, state, self.ctx.replicas(tp))
        self._send_batch()

    async def _on_leader_and_isr_response(self, broker_id: int, response: Any) -> None:
        names = {tid: name for name, tid in self.ctx.topic_ids.items()}
        offline = set()
        for topic in response.get("topics", ()):
            for p in topic.partition_errors:
                if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR and topic.topic_id in names:
                    offline.add((names[topic.topic_id], p.partition_index))
        for p in response.get("partition_errors", ()):
            if p.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add((p.topic_name, p.partition_index))
        known = self.ctx.offline_replicas.setdefault(broker_id, set())
        new = {tp for tp in offline - known if tp in self.ctx.leadership}
        if not new or broker_id not in self.ctx.live_ids:
            return
        known.update(new)
        log.warning("controller: broker %d has offline replicas %s; moving their leadership", broker_id, sorted(new))
        led = [tp for tp in new if self.ctx.leadership[tp].leader == broker_id]
        for tp in led:
            set_state(self.ctx, tp, OFFLINE)
        await self._elect_leaders(led)
        followed = [tp for tp in new if tp not in led and broker_id in self.ctx.leadership[tp].isr]
        await self.partition_state_machine.change_leaderships(
            [(tp, _out_of_isr(broker_id, self.ctx.live_ids)) for tp in followed]
        )
        self._update_metadata_everywhere(sorted(new))

    async def _on_preferred_election_notification(self, partitions) -> None:
        """/admin/preferred_replica_election (written by admin tools): elect, then remove it."""
        if partitions is None:
            return
        results = await self._preferred_election([tp for tp in partitions if tp[0] in self.ctx.assignments])
        log.info("controller: preferred replica election %s", {f"{t}-{p}": c.name for (t, p), c in results.items()})
        try:
            await self.zk.delete(znodes.PREFERRED_REPLICA_ELECTION)
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
            elif await self._change_leadership(tp, _preferred_leader(replicas, live)):
                results[tp] = ErrorCode.NONE
            else:
                results[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        self._send_batch()
        return results

    async def _list_reassignments(self, event: ev.ListPartitionReassignments) -> dict:
        partitions = None if event.partitions is None else list(event.partitions)
        return {tp: (list(self.ctx.replicas(tp)), r) for tp, r in self.reassignment.ongoing(partitions).items()}

    async def _unclean_election(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, ErrorCode]:
        """ElectLeaders of type unclean: a partition whose leader is live needs none
        (ELECTION_NOT_NEEDED); one without gets the first live ISR member, else the first live
        replica even outside the ISR (ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live).
        `None` means every partition."""
        results = {}
        live = self.ctx.live_ids - self.ctx.shutting_down
        todo = []
        for tp in partitions if partitions is not None else self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            if state is None or not self.ctx.replicas(tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader in live:
                results[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                todo.append(tp)
        await self.partition_state_machine.elect_leaders(todo, allow_unclean=True)
        self._send_batch()
        for tp in todo:
            leader = self.ctx.leadership[tp].leader
            results[tp] = ErrorCode.NONE if leader in live else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
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

    async def _controlled_shutdown(
        self, broker_id: int, broker_epoch: int | None
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership away from a broker that is shutting down and take it out of the ISRs;
        returns the partitions it still leads (those with no other ISR member). A request (v2+)
        whose broker epoch is not that broker's registration czxid is STALE_BROKER_EPOCH and moves
        nothing."""
        if broker_id not in self.ctx.live_brokers:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch is not None and broker_epoch != self.ctx.broker_epochs.get(broker_id):
            return ErrorCode.STALE_BROKER_EPOCH, []
        self.ctx.shutting_down.add(broker_id)
        live = self.ctx.live_ids
        for tp in self.ctx.partitions_on(broker_id):
            state = self.ctx.leadership.get(tp)
            if state is None or len(self.ctx.replicas(tp)) < 2:
                continue
            if state.leader == broker_id:
                await self._change_leadership(
                    tp, _leader_away_from(self.ctx.replicas(tp), live, self.ctx.shutting_down)
                )
            elif broker_id in state.isr:
                await self._change_leadership(tp, _out_of_isr(broker_id, live))
        self._send_batch()
        remaining = [tp for tp, s in self.ctx.leadership.items() if s.leader == broker_id]
        log.info(
            "controller: controlled shutdown of broker %d leaves %d partitions led by it", broker_id, len(remaining)
        )
        return ErrorCode.NONE, remaining


# ---- leader choices for one partition (Chooser: current state -> (leader, isr) or None) ----------
def _preferred_leader(replicas: list[int], live: set[int]) -> Chooser:
    def choose(current: LeaderIsr | None) -> tuple[int, list[int]] | None:
        return None if current is None else election.preferred_replica_leader(replicas, list(current.isr), live)

    return choose


def _leader_away_from(replicas: list[int], live: set[int], shutting_down: set[int]) -> Chooser:
    def choose(current: LeaderIsr | None) -> tuple[int, list[int]] | None:
        return (
            None
            if current is None
            else election.controlled_shutdown_leader(replicas, list(current.isr), live, shutting_down)
        )

    return choose


def _out_of_isr(broker_id: int, live: set[int]) -> Chooser:
    """Take `broker_id` out of the ISR, unless that would empty it or the leader is not live."""

    def choose(current: LeaderIsr | None) -> tuple[int, list[int]] | None:
        if current is None or current.leader not in live or len(current.isr) <= 1:
            return None
        return current.leader, [r for r in current.isr if r != broker_id]

    return choose
