"""All partition replicas of this broker (Kafka `ReplicaManager`).

Controller side: `become_leader_or_follower` (LeaderAndIsr), `update_metadata`, `stop_replicas` (typed
results: the handlers in `broker/handlers/controller_requests.py` build each version's response),
each fenced by controller epoch (older -> STALE_CONTROLLER_EPOCH for the whole request) and, in the
versions that carry it (LeaderAndIsr v2+, UpdateMetadata v5+, StopReplica v1+), the broker epoch:
anything but this broker's current epoch (the czxid of its /brokers/ids registration) is
STALE_BROKER_EPOCH, so a request forged from a client without the epoch changes nothing, not even
the controller epoch this broker remembers. Per partition, a state whose leader epoch is not newer
than the one held is ignored with STALE_CONTROLLER_EPOCH, as Kafka's becomeLeaderOrFollower does,
and a topic name that breaks Kafka's rule is INVALID_TOPIC_EXCEPTION (nothing is created or
deleted for it).

Appends: `append_records(entries, acks, timeout_ms, origin)` is the one append path (Kafka's
`appendRecords`), for Produce (origin CLIENT), WriteTxnMarkers and both coordinators (origin
COORDINATOR); typed per-partition results and the acks=-1 wait are in `broker/append.py`.
Client reads: `fetch` (consumers up to the HW with min_bytes/max_wait long polling; followers to
the LEO), `list_offsets`. `become_leader_or_follower` and `stop_replicas` report the partitions
that changed role to an optional callback, which the request handlers hand to every
`LeadershipListener` (the group and transaction coordinators load and unload state on it).

Delayed operations wait on `Watchers` keyed by partition; every change of a partition's LEO, HW or
role notifies its key. High watermarks are checkpointed every
`replica.high.watermark.checkpoint.interval.ms` and at shutdown.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import trio

from broker import partition as partition_clock  # now_ms: the follower state's wall clock
from broker.append import AppendResults, DelayedProduce, PartitionAppend, appended
from broker.client_appends import ClientAppends, PendingProduce
from broker.config import RACK_AWARE_SELECTOR, BrokerConfig
from broker.delayed import DelayedResponse, DelayedTimer, OffsetWaiters, Watchers
from broker.delayed_fetch import DelayedFetch, ReadyFetches
from broker.errors import (
    NotLeaderOrFollower,
    StaleBrokerEpoch,
    StaleControllerEpoch,
    UnknownTopicOrPartition,
    error_code_for,
)
from broker.fetch_sessions import FetchSessionCache, SessionError
from broker.metadata_cache import MetadataCache, partition_states
from broker.partition import NO_EPOCH, Partition
from broker.read_results import AbortedTxn, FetchPartitionData, FetchResult, FetchView, ListedOffset, denied_read
from broker.replica_fetcher import ReplicaFetcher
from broker.turn_end import TurnEnd
from broker.zk_isr_manager import ZkIsrManager
from metrics.stats import BrokerTopicStats, ReplicaStats
from protocol import record_batch as rb
from protocol.errors import ErrorCode
from protocol.topic_names import INTERNAL_TOPICS, is_valid_topic_name
from protocol.topic_partition import TopicPartition
from protocol.types import ZERO_UUID
from security.config import ClientSecurity
from storage.append_origin import AppendOrigin
from storage.errors import KafkaStorageError
from storage.log_manager import LogManager
from storage.scheduler import run_periodically
from storage.topic_configs import TopicConfigs
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1  # isolation_level (Fetch v4+, ListOffsets v2+)


class LeadershipListener(Protocol):
    """Told when this broker starts or stops leading a partition (Kafka's coordinators'
    onElection / onResignation). Called on the trio thread, in LeaderAndIsr / StopReplica order;
    must not block (a listener that needs I/O starts it in its own task)."""

    def on_election(self, tp: TopicPartition, leader_epoch: int) -> None: ...

    def on_resignation(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """`leader_epoch` None: the replica was stopped (StopReplica), not made a follower."""


#: (partitions now led, partitions now followed), after a LeaderAndIsr applied
OnLeadershipChange = Callable[[list[Partition], list[Partition]], None]


class ControllerRequestResult(NamedTuple):
    """What LeaderAndIsr or StopReplica did: the request's error, and each partition's
    (topic partition, topic id, error code) in request order (none when the request failed)."""

    error: ErrorCode
    partitions: list[tuple[TopicPartition, Any, ErrorCode]]


_NONE_DENIED: frozenset[str] = frozenset()  # a fetch without authorization refuses no topic
_FULL_PATH = FetchPartitionData(-1)  # a sentinel (compared by identity): the full read path must answer


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        log_manager: LogManager,
        metadata_cache: MetadataCache,
        topic_configs: TopicConfigs,
        zk: ZkClient | None = None,
    ):
        """`zk`: for ISR writes (None: this replica manager never changes an ISR, as in unit tests)."""
        self.config = config
        self.broker_id = config.broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = 0
        self.broker_epoch = -1
        self.delayed_timer = DelayedTimer()  # the timeouts of both kinds of waiters, served by run()
        self.watchers = Watchers(self.delayed_timer)
        self.turn_end = TurnEnd()  # work deferred to the end of the loop's turn, done in one pass
        self.ready_fetches = ReadyFetches(self.turn_end)  # delayed fetches a notify found ready
        self.client_appends = ClientAppends(self.turn_end, self._append_group, self._finish_produce)
        self.replication_waiters = OffsetWaiters(self.delayed_timer)  # acks=-1 appends waiting for the HW
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self._checkpointed_hw = dict(log_manager.loaded_high_watermarks)
        self.topic_configs = topic_configs
        self.zk = zk
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._expand_send, self._expand_receive = trio.open_memory_channel(math.inf)
        self._expand_pending: set[TopicPartition] = set()
        self.offline_partitions: set[TopicPartition] = set()  # their log dir failed (until restart)
        self._log_dir_events_send, self._log_dir_events = trio.open_memory_channel(math.inf)
        self.client_security: ClientSecurity | None = None  # the replica fetchers' (None: PLAINTEXT)
        self.topic_stats = BrokerTopicStats()  # bytes and messages in and out, for metrics/
        self.replica_stats = ReplicaStats()  # ISR shrinks and expands, for metrics/
        self.isr_manager = ZkIsrManager(zk, self.partitions, self.replica_stats, self._complete_delayed_for)

    def min_insync_replicas(self, topic: str) -> int:
        """`min.insync.replicas`: the topic's override, else the broker's."""
        return self.topic_configs.min_insync_replicas(topic)

    # ---- lookups ---------------------------------------------------------------------------------
    def get_partition(self, topic: str, index: int) -> Partition:
        """The hosted partition; raises KafkaStorageError for one whose log dir went offline,
        NotLeaderOrFollower for one the cluster has but not here, and UnknownTopicOrPartition for
        one the cluster does not have."""
        partition = self.partitions.get((topic, index))
        if partition is None and (topic, index) in self.offline_partitions:
            raise KafkaStorageError(f"{topic}-{index} is in an offline log dir on broker {self.broker_id}")
        if partition is None and self.metadata_cache.get_partition(topic, index) is not None:
            # Kafka's getPartitionOrError: the partition exists but has no replica here (a
            # reassignment moved it, or the client's metadata is stale): NOT_LEADER_OR_FOLLOWER,
            # on which clients refresh their metadata and retry
            raise NotLeaderOrFollower(f"{topic}-{index} has no replica on broker {self.broker_id}")
        if partition is None:
            raise UnknownTopicOrPartition(f"{topic}-{index} is not hosted on broker {self.broker_id}")
        return partition

    def partition_changed(self, tp: TopicPartition) -> None:
        """A change of `tp` that waiting operations may need (its log start offset moved by
        DeleteRecords): the notify an append or a HW move sends."""
        self._complete_delayed_for(tp)

    def _complete_delayed_for(self, tp: TopicPartition) -> None:
        self.watchers.notify(tp)
        for session in self.fetch_sessions.changed(tp):  # follower sessions: active again, woken
            if session.waiting:
                self.watchers.notify(session)
        if self.replication_waiters.waiting(tp):
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader or len(partition.isr) < self.min_insync_replicas(tp[0]):
                self.replication_waiters.notify(tp, None)  # every waiter's outcome is now an error
            else:
                self.replication_waiters.notify(tp, partition.high_watermark)

    # ---- controller requests -------------------------------------------------------------------
    def _check_controller(self, body, carries_broker_epoch: bool) -> None:
        """Fence a controller request: raises StaleControllerEpoch / StaleBrokerEpoch, then
        remembers its controller epoch. A broker not yet registered (epoch -1) checks no broker epoch."""
        if carries_broker_epoch and self.broker_epoch != -1 and body.broker_epoch != self.broker_epoch:
            raise StaleBrokerEpoch(f"broker epoch {body.broker_epoch} is not this broker's {self.broker_epoch}")
        if body.controller_epoch < self.controller_epoch:
            raise StaleControllerEpoch(f"controller epoch {body.controller_epoch} < {self.controller_epoch}")
        self.controller_epoch = body.controller_epoch

    async def become_leader_or_follower(
        self, body, version: int, on_leadership_change: OnLeadershipChange | None = None, step: int = 16
    ) -> ControllerRequestResult:
        """LeaderAndIsr v0-7: the request's error (STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH) or
        each partition's (topic partition, topic id, error code); the handler builds the
        response of its version. `on_leadership_change(leaders, followers)` gets the partitions
        whose new state was applied, by role. Applied in bounded steps: after every `step`
        partitions (each may create a log and write its leader epoch checkpoint) the event loop
        runs other tasks, so a LeaderAndIsr naming thousands of partitions never freezes the
        broker (issue 34)."""
        try:
            self._check_controller(body, carries_broker_epoch=version >= 2)
        except (StaleControllerEpoch, StaleBrokerEpoch) as e:
            log.warning("rejected LeaderAndIsr: %s", e)
            return ControllerRequestResult(error_code_for(e), [])
        leaders = {lead.broker_id: (lead.host_name, lead.port) for lead in body.live_leaders}
        results = []
        for i, state in enumerate(partition_states(body)):
            if i and i % step == 0:
                await trio.sleep(0)
            results.append(self._apply_one(state, leaders))
        return self._leadership_changed(results, on_leadership_change)

    def _apply_one(self, state, leaders: dict[int, tuple[str, int]]) -> tuple:
        tp = (state["topic_name"], state["partition_index"])
        return tp, state.get("topic_id", ZERO_UUID), self._apply_partition_state(tp, state, leaders)

    def _leadership_changed(self, results: list, on_leadership_change) -> ControllerRequestResult:
        if on_leadership_change is not None:
            changed = [self.partitions[tp] for tp, _, code in results if code == ErrorCode.NONE]
            on_leadership_change([p for p in changed if p.is_leader], [p for p in changed if not p.is_leader])
        return ControllerRequestResult(ErrorCode.NONE, results)

    def _apply_partition_state(self, tp: TopicPartition, state, leaders: dict[int, tuple[str, int]]) -> ErrorCode:
        if not is_valid_topic_name(tp[0]) or tp[1] < 0:
            log.error("refusing LeaderAndIsr for partition %r: not a legal topic partition", tp)
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if self.broker_id not in state["replicas"]:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if tp in self.offline_partitions:
            return ErrorCode.KAFKA_STORAGE_ERROR
        partition = self.partitions.get(tp)
        if partition is not None and state["leader_epoch"] <= partition.leader_epoch:
            log.info(
                "ignoring LeaderAndIsr for %s: leader epoch %d is not above %d",
                tp,
                state["leader_epoch"],
                partition.leader_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if partition is None:
            try:
                topic_log = self.log_manager.get_or_create_log(tp)
            except KafkaStorageError as e:
                log.error("cannot host %s: %s", tp, e)
                return ErrorCode.KAFKA_STORAGE_ERROR
            # a log loaded at startup ran with the broker's defaults until its topic's overrides
            # (loaded for this LeaderAndIsr) were known, e.g. cleanup.policy=compact
            topic_log.update_config(self.topic_configs.log_config(tp[0]))
            topic_id = state.get("topic_id", ZERO_UUID)
            partition = Partition(
                tp[0],
                tp[1],
                self.broker_id,
                topic_log,
                topic_id=None if topic_id == ZERO_UUID else topic_id,
                high_watermark=topic_log.log_start_offset,
            )
            self.partitions[tp] = partition
        checkpointed = self._checkpointed_hw.pop(tp, None)
        self._stop_fetching(tp)
        if state["leader"] == self.broker_id:
            partition.make_leader(state, checkpointed)
            log.info(
                "became leader of %s at epoch %d (ISR %s, LEO %d, HW %d)",
                tp,
                partition.leader_epoch,
                partition.isr,
                partition.log_end_offset,
                partition.high_watermark,
            )
        else:
            partition.make_follower(state, checkpointed)
            log.info("became follower of %s at epoch %d (leader %d)", tp, partition.leader_epoch, partition.leader_id)
            if partition.leader_id in leaders:
                self._start_fetching(partition, *leaders[partition.leader_id])
        self._complete_delayed_for(tp)
        return ErrorCode.NONE

    def update_metadata(self, body, version: int) -> ErrorCode:
        """UpdateMetadata v0-8: its error code. Partition states of topics whose names break
        Kafka's rule are left out of the metadata cache (and logged)."""
        try:
            self._check_controller(body, carries_broker_epoch=version >= 5)
        except (StaleControllerEpoch, StaleBrokerEpoch) as e:
            log.warning("rejected UpdateMetadata: %s", e)
            return error_code_for(e)
        for topic in {t for t, _ in self.metadata_cache.update(body)}:
            if topic not in self.metadata_cache.partitions:
                self.topic_configs.remove(topic)  # deleted: a topic re-created later reads its own
        return ErrorCode.NONE

    def stop_replicas(
        self, body, version: int, on_stopped: Callable[[list[TopicPartition]], None] | None = None
    ) -> ControllerRequestResult:
        """StopReplica v0-4: stop hosting the partitions, deleting their logs when asked; the
        request's error or each partition's (topic partition, topic id, error code).
        `on_stopped` gets the partitions that were hosted here and are not any more."""
        try:
            self._check_controller(body, carries_broker_epoch=version >= 1)
        except (StaleControllerEpoch, StaleBrokerEpoch) as e:
            return ControllerRequestResult(error_code_for(e), [])
        requests = []  # (topic, partition, delete, leader epoch)
        for p in body.ungrouped_partitions:
            requests.append((p.topic_name, p.partition_index, body.delete_partitions, -1))
        for t in body.topics:
            requests += [(t.name, i, body.delete_partitions, -1) for i in t.partition_indexes]
        for t in body.topic_states:
            requests += [
                (t.topic_name, p.partition_index, p.delete_partition, p.leader_epoch) for p in t.partition_states
            ]
        errors, stopped = [], []
        for topic, index, delete, epoch in requests:
            hosted = (topic, index) in self.partitions
            code = self._stop_replica((topic, index), delete, epoch)
            if hosted and code == ErrorCode.NONE:
                stopped.append((topic, index))
            errors.append(((topic, index), ZERO_UUID, code))
        if on_stopped is not None and stopped:
            on_stopped(stopped)
        return ControllerRequestResult(ErrorCode.NONE, errors)

    def _stop_replica(self, tp: TopicPartition, delete: bool, leader_epoch: int) -> ErrorCode:
        if not is_valid_topic_name(tp[0]):
            log.error("refusing StopReplica for partition %r: not a legal topic name", tp)
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        partition = self.partitions.get(tp)
        # -1: no epoch given; -2: the sentinel a controller sends while deleting a topic.
        if partition is not None and leader_epoch >= 0 and leader_epoch < partition.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        self.partitions.pop(tp, None)
        self._stop_fetching(tp)
        self._complete_delayed_for(tp)
        if delete:
            self.log_manager.delete_log(tp)
            self._checkpointed_hw.pop(tp, None)
        return ErrorCode.NONE

    # ---- appends (Kafka's appendRecords) -------------------------------------------------------
    def transactions_to_verify(self, entries: dict[TopicPartition, Any]) -> dict[TopicPartition, tuple[int, int, Any]]:
        """KIP-890 part 1: the partitions of a transactional Produce whose producer has no
        transaction open there at the batch's epoch, each with (producer id, producer epoch, the
        producer's VerificationGuard, taken now: Kafka's `maybeStartTransactionVerification`). The
        append after the coordinator's answer must carry that guard (`append_records`'s
        `verification`), so an abort marker written meanwhile voids it. Partitions this broker
        does not lead, and malformed records, are left to the append."""
        out: dict[TopicPartition, tuple[int, int, Any]] = {}
        for tp, records in entries.items():
            partition = self.partitions.get(tp)
            if partition is None or not partition.is_leader or not records or len(records) < rb.HEADER_SIZE:
                continue
            try:
                header = rb.read_header(records)
            except Exception:  # the append answers CORRUPT_MESSAGE
                continue
            if not header.is_transactional or header.is_control:
                continue
            state = partition.log.producer_state
            if not state.has_ongoing_transaction(header.producer_id, header.producer_epoch):
                guard = state.maybe_start_verification(header.producer_id)
                out[tp] = (header.producer_id, header.producer_epoch, guard)
        return out

    def append_records(
        self,
        entries: dict[TopicPartition, Any],
        acks: int,
        timeout_ms: int,
        origin: AppendOrigin,
        verification: dict[TopicPartition, dict] | None = None,
    ) -> AppendResults | DelayedResponse:
        """Append each partition's records (`entries`: tp -> v2 batches as bytes, None for a
        request that carried null records) now, in order; see `broker/append.py` for the
        outcome's shape and the acks=-1 wait. Per-partition errors: INVALID_REQUIRED_ACKS
        (CLIENT), UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, INVALID_TOPIC_EXCEPTION
        (an illegal name, or a CLIENT's append to an internal topic), KAFKA_STORAGE_ERROR,
        NOT_ENOUGH_REPLICAS(_AFTER_APPEND), CORRUPT_MESSAGE,
        MESSAGE_TOO_LARGE, INVALID_RECORD, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, ...,
        REQUEST_TIMED_OUT. `verification` (KIP-890, None when off): per partition, producer id ->
        the guard its transactional batches were verified under (`transactions_to_verify`)."""
        results: AppendResults = {}
        waiting: dict[TopicPartition, int] = {}  # tp -> offset the HW must reach
        self.client_appends.flush(entries)  # what came before for these partitions goes first
        for tp, records in entries.items():
            guards = None if verification is None else verification.get(tp, {})
            outcome = results[tp] = self._append_one(tp, acks, records, origin, guards)
            if acks == -1 and outcome.info is not None:
                waiting[tp] = outcome.info.last_offset + 1
        if not waiting:
            return results
        return self._replicated(waiting, results, trio.current_time() + timeout_ms / 1000)

    def _replicated(
        self, waiting: dict[TopicPartition, int], results: AppendResults, deadline: float
    ) -> DelayedResponse:
        """The acks=-1 wait (Kafka's DelayedProduce): completed with `results` once the HW reaches
        each partition's offset in `waiting`, an append can no longer be covered, or `deadline`
        (trio clock, s) passes."""
        delayed = DelayedResponse()
        DelayedProduce(self, waiting, results, deadline, delayed).try_complete()
        return delayed

    async def append_records_and_wait(
        self, entries: dict[TopicPartition, Any], acks: int, timeout_ms: int, origin: AppendOrigin
    ) -> AppendResults:
        """`append_records`, awaiting its outcome (for callers that run in a task of their own)."""
        result = self.append_records(entries, acks, timeout_ms, origin)
        return await appended(result, timeout_ms, self.delayed_timer.running)

    def _append_one(
        self, tp: TopicPartition, acks: int, records, origin: AppendOrigin, verification: dict | None = None
    ) -> PartitionAppend:
        client = origin is AppendOrigin.CLIENT
        if client and acks not in (-1, 0, 1):
            return PartitionAppend(ErrorCode.INVALID_REQUIRED_ACKS)
        if tp not in self.partitions and not is_valid_topic_name(tp[0]):  # hosted ones were checked on arrival
            return PartitionAppend(ErrorCode.INVALID_TOPIC_EXCEPTION, None, "illegal topic name")
        if client and tp[0] in INTERNAL_TOPICS:
            # only the coordinators write their topics (Kafka's ReplicaManager.appendToLocalLog
            # refuses a client's append to an internal topic before it looks for the partition)
            return PartitionAppend(ErrorCode.INVALID_TOPIC_EXCEPTION, None, f"Cannot append to internal topic {tp[0]}")
        try:
            partition = self.get_partition(*tp)
            if records is None:
                return PartitionAppend(ErrorCode.CORRUPT_MESSAGE, None, "null records")
            info = partition.append_records_as_leader(
                records,
                acks,
                self.min_insync_replicas(tp[0]),
                origin=origin,
                verification=verification,
            )
        except Exception as e:  # mapped to Kafka's code; unexpected ones are logged
            return self._append_failed(tp, e)
        self._complete_delayed_for(tp)
        if client:
            self.topic_stats.appended(tp[0], info.size, info.records)
        return PartitionAppend(ErrorCode.NONE, info)

    def _append_failed(self, tp: TopicPartition, e: Exception) -> PartitionAppend:
        """An append's exception -> its PartitionAppend (Kafka's code; unexpected ones are
        logged; a storage error takes the log dir offline)."""
        code = error_code_for(e)
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("append to %s failed", tp, exc_info=e)
        if isinstance(e, KafkaStorageError):
            self.handle_log_dir_failure(e.log_dir)
        record_errors = tuple((index, message[:200]) for index, message in getattr(e, "record_errors", ()))
        return PartitionAppend(code, None, str(e)[:200], record_errors)

    # ---- the appends of one loop turn (broker/client_appends.py) -------------------------------
    def append_records_soon(
        self,
        entries: dict[TopicPartition, Any],
        acks: int,
        timeout_ms: int,
        respond: Callable[[AppendResults], Any],
        appended: Callable[[], Any] = lambda: None,
    ) -> None:
        """A client's Produce appends (no KIP-890 guards), as `append_records` makes them, but
        each partition led here held until the end of the event loop's turn and written with the
        others that came for it in the same turn (`broker/client_appends.py`). `respond(results)`
        gets what `append_records` returns or completes its DelayedResponse with, once: after the
        appends (acks 0 and 1) or once the HW covers them (acks=-1; REQUEST_TIMED_OUT after
        `timeout_ms`, counted from now). `appended()` is called once every partition's append is
        made (or refused), before `respond`. Without the turn's task running (unit tests), appends now."""
        if not self.turn_end.running:
            result = self.append_records(entries, acks, timeout_ms, AppendOrigin.CLIENT)
            appended()
            if isinstance(result, DelayedResponse):
                result.on_complete(respond)
            else:
                respond(result)
            return
        request = PendingProduce(
            dict.fromkeys(entries), acks, trio.current_time() + timeout_ms / 1000, respond, appended
        )
        hosted = self.partitions.get
        for tp, records in entries.items():
            partition = hosted(tp)
            if (
                partition is not None
                and partition.is_leader
                and records is not None
                and acks in (-1, 0, 1)
                and tp[0] not in INTERNAL_TOPICS
            ):
                self.client_appends.add(request, tp, records, acks)
            else:  # refused (nothing is appended): answered as `append_records` answers it
                request.results[tp] = self._append_one(tp, acks, records, AppendOrigin.CLIENT)
        if request.left == 0:
            self._finish_produce(request)

    def _append_group(self, tp: TopicPartition, appends: list[tuple[Any, int]]) -> list[PartitionAppend]:
        """One partition's Produce appends of a loop turn, `(records, acks)` in arrival order,
        written as one; each gets the PartitionAppend it would have got alone."""
        partition = self.partitions.get(tp)
        if len(appends) == 1 or partition is None or not partition.is_leader:
            # one alone takes the one-append path; a partition whose leadership moved during the
            # turn refuses each as that path does
            return [self._append_one(tp, acks, records, AppendOrigin.CLIENT) for records, acks in appends]
        try:
            outcomes = partition.append_group_as_leader(appends, self.min_insync_replicas(tp[0]))
        except Exception as e:
            failed = self._append_failed(tp, e)
            return [failed] * len(appends)
        results, size, records = [], 0, 0
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                results.append(self._append_failed(tp, outcome))
            else:
                results.append(PartitionAppend(ErrorCode.NONE, outcome))
                size += outcome.size
                records += outcome.records
        if size:
            self._complete_delayed_for(tp)
            self.topic_stats.appended(tp[0], size, records)
        return results

    def _finish_produce(self, request: PendingProduce) -> None:
        """A request whose partitions are all appended: answered now, or (acks=-1) once the HW
        covers its appends (Kafka's DelayedProduce, with the request's own deadline)."""
        request.appended()
        results = request.results
        waiting = {}
        if request.acks == -1:
            waiting = {tp: r.info.last_offset + 1 for tp, r in results.items() if r.info is not None}
        if not waiting:
            request.respond(results)
            return
        self._replicated(waiting, results, request.deadline).on_complete(request.respond)

    def replication_outcome(self, tp: TopicPartition, required: int) -> ErrorCode | None:
        """What an acks=-1 append ending before offset `required` gets now: NONE once the HW
        covers it, NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS_AFTER_APPEND when it no longer
        can, None while it must wait."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required:
            return ErrorCode.NONE
        if len(partition.isr) < self.min_insync_replicas(tp[0]):
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None

    # ---- fetch ---------------------------------------------------------------------------------
    def fetch_now(
        self,
        body,
        may_read: Callable[[str], bool] | None,
        version: int,
        complete: Callable[[FetchResult], Any],
    ) -> DelayedFetch | None:
        """A Fetch v4-12 request body -> its partitions' reads, given to `complete(result)` once:
        before this returns when the fetch can answer now, else later by the `DelayedFetch`
        returned (Kafka's: woken by a change of its partitions, or at `max_wait_ms`). Incremental
        fetch sessions (KIP-227, `broker/fetch_sessions.py`): a session's result holds only
        partitions with news. `may_read(topic)` (authorization): a topic it refuses answers
        TOPIC_AUTHORIZATION_FAILED. A consumer's v11+ fetch may be answered by a follower
        replica, and with `replica.selector.class` rack-aware a leader names a preferred read
        replica in the consumer's `rack_id` (KIP-392)."""
        try:
            context = self.fetch_sessions.context(body)
        except SessionError as e:
            complete(FetchResult(e.error_code, 0))
            return None
        any_replica = body.replica_id < 0 and version >= 11
        client_rack = ""  # decided once here, not for every partition read
        if any_replica and self.config["replica.selector.class"] == RACK_AWARE_SELECTOR:
            rack = body.get("rack_id") or ""
            client_rack = "" if rack == self.config["broker.rack"] else rack
        follower = body.replica_id >= 0
        # a follower's incremental fetch reads its session's active partitions (settled ones are
        # stamped through the session's clock: broker/fetch_sessions.py)
        session = context.session if follower and context.incremental else None
        now = partition_clock.now_ms() if follower else 0  # the fetch's time, for every partition
        if session is not None:
            topics = self.fetch_sessions.follower_view(session, body.replica_id, now)
        else:
            topics = context.topics
        denied = _NONE_DENIED if may_read is None else frozenset(t.topic for t in topics if not may_read(t.topic))
        view = FetchView(
            body.replica_id,
            body.max_bytes,
            body.min_bytes,
            topics,
            body.isolation_level == READ_COMMITTED,
            denied,
            context.unchanged if context.incremental else None,
            any_replica=any_replica,
            client_rack=client_rack,
            settle=session.settle if session is not None and not denied else None,
        )
        responses, total, errors = self._read(view, follower, now_ms=now)
        if errors or body.max_wait_ms <= 0 or total >= body.min_bytes:
            complete(self._fetched(context, follower, responses))
            return None
        keys: list = [(t.topic, p.partition) for t in view.topics for p in t.partitions]
        epochs = {key: getattr(self.partitions.get(key), "leader_epoch", None) for key in keys}
        answer = complete
        if session is not None:
            keys = [session]  # woken by a change of any of its partitions (`FetchSessionCache.changed`)
            waiting = session
            waiting.waiting += 1

            def answer(result: FetchResult) -> None:
                waiting.waiting -= 1
                complete(result)

        def current() -> FetchView:
            """The view now: a follower session's partitions made active since are read too."""
            return view if session is None else view._replace(topics=session.active_view())

        def enough() -> bool:
            # Kafka's DelayedFetch.tryComplete: decide from offsets, without reading. With
            # min_bytes > 1 the bytes are counted by reading again.
            if body.min_bytes > 1:
                return self._read(current(), follower, record_fetch=False)[1] >= body.min_bytes
            return self._fetch_can_complete(current(), follower, epochs)

        def read() -> FetchResult:
            return self._fetched(context, follower, self._read(current(), follower, record_fetch=False)[0])

        deadline = trio.current_time() + body.max_wait_ms / 1000
        delayed = DelayedFetch(
            self.watchers, self.delayed_timer, keys, enough, read, answer, deadline, self.ready_fetches.defer
        )
        delayed.start()
        return delayed

    async def fetch(self, body, may_read: Callable[[str], bool] | None = None, version: int = 4) -> FetchResult:
        """`fetch_now`, awaiting its result (for callers that run in a task of their own). Without
        a running delayed timer (a replica manager whose `run` is not started, as in unit tests)
        the wait itself ends a delayed fetch at `max_wait_ms`."""
        answer = DelayedResponse()
        delayed = self.fetch_now(body, may_read, version, answer.complete)
        if delayed is not None and not self.delayed_timer.running:
            with trio.move_on_after(max(0.0, body.max_wait_ms / 1000)):
                return await answer.wait()
            delayed.finish()
        return await answer.wait()

    def _fetched(self, context, follower: bool, responses: list) -> FetchResult:
        """A fetch's reads -> its result: an incremental session's partitions without news left out."""
        answered = []
        for topic, read in responses:
            parts = [entry for entry in read if context.include(topic, entry)]
            if parts:
                answered.append((topic, parts))
        self.topic_stats.fetched(answered, follower)
        return FetchResult(ErrorCode.NONE, context.session_id, answered)

    def _fetch_can_complete(self, body: FetchView, follower: bool, epochs: dict) -> bool:
        """A waiting fetch answers now if any partition has data past its fetch offset (to the
        LEO for followers, the HW for consumers) or changed leadership or epoch. A high watermark
        change alone does not answer a follower (KAFKA-9952 removed that for the fetch rate it
        cost): it travels with the next data, or when the wait expires."""
        for topic in body.topics:
            for p in topic.partitions:
                partition = self.partitions.get((topic.topic, p.partition))
                if partition is None or not (partition.is_leader or body.any_replica):
                    return True
                # a follower session's partition made active since the wait began is held to
                # the epoch its fetch named
                expected = epochs.get((topic.topic, p.partition), p.current_leader_epoch)
                if partition.leader_epoch != expected and expected != NO_EPOCH:
                    return True
                if follower:
                    if partition.log.log_end_offset > p.fetch_offset:
                        return True
                elif (
                    partition.last_stable_offset if body.read_committed else partition.high_watermark
                ) > p.fetch_offset:
                    return True
        return False

    def _read(
        self, body: FetchView, follower: bool, record_fetch: bool = True, now_ms: int = 0
    ) -> tuple[list[tuple[str, list[FetchPartitionData]]], int, bool]:
        """-> (reads per topic, bytes read, answer now). `record_fetch`: note a follower's fetch
        offset (its LEO) and ISR eligibility, at `now_ms` (the fetch's wall-clock time, for every
        partition); done once per request, not on re-reads after a wait."""
        responses: list[tuple[str, list[FetchPartitionData]]] = []
        total, errors = 0, False
        budget = body.max_bytes
        # A follower's fetch of a partition led here that is idle (at the LEO, in the ISR, nothing
        # moved: most of a session's partitions, each fetch) is recorded here in one step, and
        # left out when its session already has its HW and log start. The full recording is left
        # to `_read_one` only when this one does not apply (a re-read after a wait records nothing).
        unchanged = body.unchanged if follower else None
        settle = body.settle  # a follower session's: settled partitions are left out of its next fetches
        replica_id = body.replica_id
        hosted = self.partitions.get
        for topic in body.topics:
            parts: list[FetchPartitionData] = []
            if topic.topic in body.denied:
                errors = True
                responses.append((topic.topic, [denied_read(p.partition) for p in topic.partitions]))
                continue
            name = topic.topic
            for p in topic.partitions:
                record = follower and record_fetch
                if follower:
                    partition = hosted((name, p.partition))
                    if (
                        partition is not None
                        and partition.leader_id == partition.local_broker_id
                        and (p.current_leader_epoch == NO_EPOCH or p.current_leader_epoch == partition.leader_epoch)
                    ):
                        if record_fetch:
                            settled = partition.record_caught_up_fetch(
                                replica_id, p.fetch_offset, p.log_start_offset, now_ms
                            )
                            record = not settled  # recorded in one step already
                        else:
                            settled = p.fetch_offset == partition.log.log_end_offset and replica_id in partition.remote
                        if (
                            settled
                            and unchanged is not None
                            and unchanged(name, p.partition, partition.high_watermark, partition.log.log_start_offset)
                        ):
                            if settle is not None and record_fetch:
                                settle((name, p.partition), partition.remote[replica_id])
                            continue
                entry = self._read_one(
                    topic.topic,
                    p,
                    record,
                    follower,
                    budget,
                    first=(total == 0),
                    replica_id=body.replica_id,
                    read_committed=body.read_committed,
                    unchanged=body.unchanged,
                    any_replica=body.any_replica,
                    client_rack=body.client_rack,
                )
                if entry is None:  # a caught-up follower's partition with nothing new to say
                    continue
                size = len(entry.records)
                total += size
                budget = max(0, budget - size)
                errors = errors or entry.error_code != ErrorCode.NONE  # an error answers now
                parts.append(entry)
            responses.append((topic.topic, parts))
        return responses, total, errors

    def _read_one(
        self,
        topic: str,
        p,
        record_fetch: bool,
        follower: bool,
        budget: int,
        first: bool,
        replica_id: int,
        read_committed: bool = False,
        unchanged: Callable[[str, int, int, int], bool] | None = None,
        any_replica: bool = False,
        client_rack: str = "",
    ) -> FetchPartitionData | None:
        """One partition's read, or None when `unchanged` says an
        incremental session would leave it out: a follower at the LEO, whose fetch state was
        still recorded (its caught-up time keeps it in the ISR), with the HW and log start
        offset the session last sent."""
        if follower:
            read = self._follower_read(topic, p, record_fetch, replica_id, unchanged, budget, first)
            if read is not _FULL_PATH:
                return read
            record_fetch = False  # recorded by the follower read before it gave up
        entry = FetchPartitionData(p.partition)
        try:
            partition = self.get_partition(topic, p.partition)
            if follower:
                partition.require_leader(p.current_leader_epoch)
                partition.check_follower_fetch(replica_id, p.fetch_offset)
            if record_fetch:
                self._record_follower_fetch(partition, replica_id, p)
            preferred = None if follower else self._preferred_read_replica(partition, p.fetch_offset, client_rack)
            if preferred is not None:
                entry.preferred_read_replica = preferred  # KIP-392: no records, read there instead
            # a follower already at the LEO has nothing to read
            elif not (follower and p.fetch_offset == partition.log.log_end_offset):
                info = partition.read(
                    p.fetch_offset,
                    min(p.partition_max_bytes, budget),
                    committed_only=not follower,
                    min_one_batch=first,
                    current_leader_epoch=p.current_leader_epoch,
                    read_committed=read_committed and not follower,
                    leader_only=not any_replica,
                )
                entry.records = info.records
                if read_committed and not follower:
                    aborted = partition.log.collect_aborted_txns(p.fetch_offset, info.next_offset)
                    entry.aborted_transactions = [AbortedTxn(t.producer_id, t.first_offset) for t in aborted]
        except Exception as e:
            entry.error_code = error_code_for(e)
            if isinstance(e, KafkaStorageError):
                self.handle_log_dir_failure(e.log_dir)
            entry.records = b""  # Kafka's MemoryRecords.EMPTY: librdkafka cannot parse null records here
            if entry.error_code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("fetch from %s-%d failed", topic, p.partition)
        hosted = self.partitions.get((topic, p.partition))
        if hosted is not None and entry.error_code in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
            entry.high_watermark = hosted.high_watermark
            entry.last_stable_offset = hosted.last_stable_offset
            entry.log_start_offset = hosted.log.log_start_offset
        return entry

    def _preferred_read_replica(self, partition: Partition, fetch_offset: int, client_rack: str) -> int | None:
        """Kafka's RackAwareReplicaSelector, on the leader (ReplicaManager.findPreferredReadReplica):
        for a consumer in `client_rack` ("" when the selector does not apply, see FetchView), None
        (read here) when no replica there qualifies; else the most caught-up replica in the rack
        that is in the ISR, alive, and holds `fetch_offset` (its LEO above it, its log start at or
        below it)."""
        if not client_rack or not partition.is_leader:
            return None
        brokers = self.metadata_cache.brokers
        candidates = [
            r
            for r in partition.isr
            if r != self.broker_id
            and r in brokers
            and brokers[r].rack == client_rack
            and r in partition.remote
            and partition.remote[r].log_end_offset >= fetch_offset
            and 0 <= partition.remote[r].log_start_offset <= fetch_offset
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda r: (partition.remote[r].log_end_offset, partition.remote[r].caught_up_ms()))

    def _record_follower_fetch(self, partition: Partition, replica_id: int, p) -> None:
        """Kafka's updateFollowerFetchState: the follower's LEO and log start offset from its fetch
        (waking what waits on the HW when either moved), and an ISR expansion when it caught up."""
        log_start_moved = partition.update_follower_log_start(replica_id, p.log_start_offset)
        if partition.update_follower_fetch(replica_id, p.fetch_offset) or log_start_moved:
            self._complete_delayed_for(partition.tp)
        if partition.should_expand_isr(replica_id) and partition.tp not in self._expand_pending:
            self._expand_pending.add(partition.tp)
            self._expand_send.send_nowait(partition.tp)

    def _follower_read(
        self, topic: str, p, record_fetch: bool, replica_id: int, unchanged, budget: int, first: bool
    ) -> FetchPartitionData | None:
        """`_read_one` for a follower of a partition this broker leads, when nothing goes wrong
        (Kafka's readFromLocalLog for a follower: its fetch state recorded once per request, then
        up to the LEO): the entry, or None when an incremental session leaves out a partition
        with nothing new (`unchanged`). `_FULL_PATH` when the full path must answer: an error to
        report (it runs the checks again, and records nothing twice: the fetch state was
        recorded here only when no check failed)."""
        partition = self.partitions.get((topic, p.partition))
        if (
            partition is None
            or partition.leader_id != partition.local_broker_id
            or (p.current_leader_epoch != NO_EPOCH and p.current_leader_epoch != partition.leader_epoch)
            or replica_id == partition.local_broker_id
            or replica_id not in partition.replicas
        ):
            return _FULL_PATH
        log = partition.log
        leo = log.log_end_offset
        if p.fetch_offset > leo:
            return _FULL_PATH
        if record_fetch:
            self._record_follower_fetch(partition, replica_id, p)
        if p.fetch_offset == leo:  # nothing to read
            if unchanged is not None and unchanged(topic, p.partition, partition.high_watermark, log.log_start_offset):
                return None
            records = b""
        else:
            try:
                records = log.read(
                    p.fetch_offset, min(p.partition_max_bytes, budget), None, min_one_batch=first
                ).records
            except Exception:
                return _FULL_PATH
        return FetchPartitionData(
            p.partition,
            ErrorCode.NONE,
            partition.high_watermark,
            partition.last_stable_offset,
            log.log_start_offset,
            records,
        )

    # ---- log dir failures (Kafka's LogDirFailureChannel / handleLogDirFailure) ---------------------
    def handle_log_dir_failure(self, log_dir) -> None:
        """Take a failed log dir offline: its partitions stop being served (KAFKA_STORAGE_ERROR
        to every request for them), their fetchers stop, and the controller is told through
        /log_dir_event_notification so it moves their leadership to other in-sync replicas. The
        dir stays offline until the broker restarts."""
        if log_dir is None:
            return
        lost = self.log_manager.mark_offline(log_dir)
        if not lost:
            return
        for tp in lost:
            self.partitions.pop(tp, None)
            self._stop_fetching(tp)
            self.offline_partitions.add(tp)
            self._complete_delayed_for(tp)
        self._log_dir_events_send.send_nowait(log_dir)

    async def _notify_log_dir_events(self) -> None:
        """Write Kafka's log dir event for each failed dir: the controller sends this broker
        LeaderAndIsr for all its replicas and learns the offline ones from the answers."""
        assert self.zk is not None, "started only with ZooKeeper"
        async for log_dir in self._log_dir_events:
            while True:
                try:
                    await self.zk.create(
                        f"{znodes.LOG_DIR_EVENT_NOTIFICATION}/log_dir_event_",
                        znodes.encode_log_dir_event(self.broker_id),
                        sequence=True,
                        makepath=True,
                    )
                    log.info("told the controller that log dir %s failed", log_dir)
                    break
                except Exception as e:
                    log.warning("log dir event for %s not written (%s); retrying", log_dir, e)
                    await trio.sleep(1)

    # ---- list offsets --------------------------------------------------------------------------
    def list_offsets(self, body, version: int) -> list[tuple[str, list[ListedOffset]]]:
        """A ListOffsets v1-7 request body -> per topic (request order) each partition's offset
        for its timestamp (`Partition.offset_for_timestamp`; -2 earliest, -1 latest, -3 max
        timestamp, else the first offset at or after it), or its error code."""
        out = []
        for topic in body.topics:
            parts = []
            for p in topic.partitions:
                entry = ListedOffset(p.partition_index)
                try:
                    partition = self.get_partition(topic.name, p.partition_index)
                    entry.timestamp, entry.offset, entry.leader_epoch = partition.offset_for_timestamp(
                        p.timestamp,
                        committed_only=body.replica_id == CONSUMER_REPLICA_ID,
                        current_leader_epoch=p.current_leader_epoch,
                        read_committed=version >= 2 and body.isolation_level == READ_COMMITTED,
                    )
                except Exception as e:
                    entry.error_code = error_code_for(e)
                parts.append(entry)
            out.append((topic.name, parts))
        return out

    # ---- high watermarks -------------------------------------------------------------------------
    def high_watermark_of(self, tp: TopicPartition) -> int:
        """The HW of a hosted partition; 0 for a log this broker does not host (yet), so
        retention deletes none of it."""
        partition = self.partitions.get(tp)
        return partition.high_watermark if partition is not None else 0

    def high_watermarks(self) -> dict[TopicPartition, int]:
        hws = {tp: p.high_watermark for tp, p in self.partitions.items()}
        hws.update({tp: hw for tp, hw in self._checkpointed_hw.items() if tp not in hws})
        return hws

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Own the replica fetchers and run the periodic work (HW checkpoints, ISR shrink, ISR
        expansion) and the delayed operations' timeouts until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self.delayed_timer.run)
            nursery.start_soon(self.turn_end.run)  # ready fetches and the turn's Produce appends
            nursery.start_soon(
                run_periodically,
                "high watermark checkpoint",
                self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                self._checkpoint_high_watermarks,
            )
            if self.zk is not None:
                nursery.start_soon(
                    run_periodically,
                    "ISR shrink",
                    self.config["replica.lag.time.max.ms"] / 2000,
                    self._maybe_shrink_isrs,
                )
                nursery.start_soon(self._expand_isr_on_request)
                nursery.start_soon(self._notify_log_dir_events)
            task_status.started()

    async def _checkpoint_high_watermarks(self) -> None:
        snapshot = self.log_manager.high_watermark_snapshot(self.high_watermarks())
        await trio.to_thread.run_sync(self.log_manager.write_checkpoints, snapshot)

    # ---- replica fetchers (follower side) -----------------------------------------------------
    def _start_fetching(self, partition: Partition, host: str, port: int) -> None:
        fetcher = self.fetchers.get(partition.leader_id)
        if fetcher is not None and (fetcher.host, fetcher.port) != (host, port):
            fetcher.scope.cancel()
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(
                self.broker_id,
                partition.leader_id,
                host,
                port,
                self.config,
                self._complete_delayed_for,
                self.handle_log_dir_failure,
                self.client_security,
            )
            self.fetchers[partition.leader_id] = fetcher
            if self._nursery is not None:
                self._nursery.start_soon(fetcher.run)
        fetcher.add(partition)

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    # ---- ISR maintenance (leader side) --------------------------------------------------------
    async def _maybe_shrink_isrs(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2."""
        max_lag = self.config["replica.lag.time.max.ms"]
        for partition in [p for p in self.partitions.values() if p.can_change_isr]:
            lagging = partition.out_of_sync_replicas(max_lag)
            if lagging and partition.can_change_isr:
                log.info(
                    "shrinking ISR of %s from %s: %s not caught up within %d ms",
                    partition.tp,
                    partition.isr,
                    lagging,
                    max_lag,
                )
                await self.isr_manager.write(partition, partition.prepare_isr_shrink(lagging))

    async def _expand_isr_on_request(self) -> None:
        async for tp in self._expand_receive:
            self._expand_pending.discard(tp)
            partition = self.partitions.get(tp)
            if partition is None or not partition.can_change_isr:
                continue
            joiners = [r for r in partition.replicas if partition.should_expand_isr(r)]
            if joiners:
                log.info("expanding ISR of %s from %s with %s", tp, partition.isr, joiners)
                await self.isr_manager.write(partition, partition.prepare_isr_expand(joiners))
