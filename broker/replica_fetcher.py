"""Replica fetchers (Kafka `ReplicaFetcherThread`, as trio tasks): one per leader broker, covering
every partition this broker follows on that leader.

For each partition the fetcher first truncates by leader epoch (OffsetForLeaderEpoch to the leader,
`truncation.truncation_offset`), then fetches from its LEO with its current leader epoch
(`replica_id` = this broker), appends the batches exactly as the leader stored them, and takes the
leader's high watermark (follower HW = min(leader HW, own LEO)). Fetches use an incremental fetch
session (KIP-227, `client/fetch_session.py`): after the first, a request lists only partitions whose
fetch offset changed, and the answer only partitions with news. Errors back a partition off for
`replica.fetch.backoff.ms`; a broken connection reconnects with backoff. The replica manager adds,
re-targets and removes partitions on LeaderAndIsr / StopReplica.

Building a request costs what changed, not what is followed (issue 48): the fields of the last
request are kept (`_wanted`), and only partitions marked since (`_dirty`: added, removed,
truncated, backed off or answered) are looked at again. Every `REBUILD_S` a request is built
from every partition, which bounds what changes a partition without this fetcher's knowledge
(retention raising a log start offset).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from broker.truncation import truncation_offset
from client.connection import Connection, ConnectionClosed
from client.fetch_session import FINAL_EPOCH, FetchSessionHandler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, ProtocolError
from storage.errors import KafkaStorageError, StorageError

if TYPE_CHECKING:
    from broker.partition import Partition

log = logging.getLogger(__name__)

#: at least this often (s) a request is built from every partition followed, not only the marked ones
REBUILD_S = 1.0


@dataclass
class FetchState:
    partition: Partition
    leader_epoch: int
    truncated: bool = False
    delay_until: float = 0.0
    # the Fetch fields last built for this partition and what they were built from (fetch
    # offset, last fetched epoch, log start offset, leader epoch, replica.fetch.max.bytes): an
    # idle partition's next fetch reuses the same dict, which the fetch session then finds
    # unchanged by identity
    fields: dict | None = None
    built_from: tuple = ()


class ReplicaFetcher:
    def __init__(
        self, broker_id: int, leader_id: int, host: str, port: int, config, on_change, on_storage_error, security=None
    ):
        self.broker_id, self.leader_id = broker_id, leader_id
        self.security = security  # ClientSecurity of the inter-broker listener (None: PLAINTEXT)
        self.host, self.port = host, port
        self.config = config
        self.on_change = on_change  # called with a tp after its log or HW changed
        self.on_storage_error = on_storage_error  # called with the log dir of a failed follower append
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self._wakeup = trio.Event()
        self.scope = trio.CancelScope()
        self.session = FetchSessionHandler()  # incremental fetch session with the leader (KIP-227)
        self._wanted: dict[tuple[str, int], dict] = {}  # the last request's partitions and fields
        self._dirty: set[tuple[str, int]] = set()  # partitions to look at again before the next one
        self._delayed: set[tuple[str, int]] = set()  # partitions backed off (out of `_wanted`)
        self._rebuild_at = 0.0  # trio time of the next request built from every partition
        self._max_bytes = -1  # the replica.fetch.max.bytes of `_wanted`
        self._untruncated: set[tuple[str, int]] = set()  # partitions that may need truncating first

    def add(self, partition: Partition) -> None:
        self.partitions[partition.tp] = FetchState(partition, partition.leader_epoch)
        self._dirty.add(partition.tp)
        self._untruncated.add(partition.tp)
        self._wakeup.set()

    def remove(self, tp) -> None:
        self.partitions.pop(tp, None)
        self._dirty.add(tp)

    async def run(self) -> None:
        backoff = self.config["replica.fetch.backoff.ms"] / 1000
        with self.scope:
            while True:
                try:
                    async with Connection.open(
                        self.host, self.port, client_id=f"replica-fetcher-{self.broker_id}", security=self.security
                    ) as conn:
                        self.session.reset()
                        while True:
                            if not self.partitions:
                                self._wakeup = trio.Event()
                                await self._wakeup.wait()
                            await self._truncate(conn)
                            await self._fetch(conn)
                except (ConnectionClosed, trio.TooSlowError, ProtocolError) as e:
                    log.info(
                        "fetcher for leader %d (%s:%d): %s; retrying in %.1f s",
                        self.leader_id,
                        self.host,
                        self.port,
                        e,
                        backoff,
                    )
                    await trio.sleep(backoff)

    def _to_truncate(self) -> list[tuple[tuple[str, int], FetchState]]:
        """The partitions to truncate (by leader epoch) before they are fetched, not backed off:
        every partition is one when added, and again when its fetch found its log diverged
        (`_untruncated` holds them, so an iteration costs nothing when there are none)."""
        now = trio.current_time()
        pending = []
        for tp in list(self._untruncated):
            state = self.partitions.get(tp)
            if state is None or state.truncated:
                self._untruncated.discard(tp)
            elif state.delay_until <= now:
                pending.append((tp, state))
        return pending

    def _back_off(self, state: FetchState) -> None:
        state.delay_until = trio.current_time() + self.config["replica.fetch.backoff.ms"] / 1000
        self._dirty.add(state.partition.tp)

    async def _truncate(self, conn: Connection) -> None:
        pending = self._to_truncate()
        if not pending:
            return
        topics: dict[str, list] = {}
        for (topic, index), state in pending:
            topics.setdefault(topic, []).append(
                {
                    "partition": index,
                    "current_leader_epoch": state.leader_epoch,
                    "leader_epoch": state.partition.log.epoch_cache.latest_epoch,
                }
            )
        response = await conn.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            {"replica_id": self.broker_id, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]},
            timeout_s=30,
        )
        for t in response.topics:
            for p in t.partitions:
                found = self.partitions.get((t.topic, p.partition))
                if found is None:
                    continue
                state = found
                if p.error_code != ErrorCode.NONE:
                    log.info(
                        "OffsetForLeaderEpoch %s-%d on leader %d: %s",
                        t.topic,
                        p.partition,
                        self.leader_id,
                        ErrorCode(p.error_code).name,
                    )
                    self._back_off(state)
                    continue
                partition = state.partition
                offset = truncation_offset(
                    partition.log.epoch_cache,
                    partition.log_end_offset,
                    partition.high_watermark,
                    p.leader_epoch,
                    p.end_offset,
                )
                if offset < partition.log_end_offset:
                    log.info(
                        "truncating %s-%d from LEO %d to %d (leader %d epoch %d ends at %d)",
                        t.topic,
                        p.partition,
                        partition.log_end_offset,
                        offset,
                        self.leader_id,
                        p.leader_epoch,
                        p.end_offset,
                    )
                    partition.truncate_to(offset)
                state.truncated = True
                self._dirty.add(partition.tp)

    def _update_wanted(self) -> tuple[list, list]:
        """Bring `_wanted` up to date (the marked partitions, or every one when `REBUILD_S`
        passed); returns (partitions whose fields changed or that were added, partitions
        dropped)."""
        now = trio.current_time()
        max_bytes = self.config["replica.fetch.max.bytes"]
        if now >= self._rebuild_at or max_bytes != self._max_bytes:  # (a dynamic config change)
            self._rebuild_at, self._max_bytes = now + REBUILD_S, max_bytes
            self._dirty.update(self.partitions)
            self._dirty.update(self._wanted)
        if self._delayed:
            due = [tp for tp in self._delayed if (s := self.partitions.get(tp)) is None or s.delay_until <= now]
            self._delayed.difference_update(due)
            self._dirty.update(due)
        changed, removed = [], []
        wanted = self._wanted
        for tp in self._dirty:
            state = self.partitions.get(tp)
            if state is None or not state.truncated or state.delay_until > now:
                if state is not None and state.delay_until > now:
                    self._delayed.add(tp)
                if wanted.pop(tp, None) is not None:
                    removed.append(tp)
                continue
            log_ = state.partition.log
            source = (
                log_.log_end_offset,
                log_.epoch_cache.latest_epoch,
                log_.log_start_offset,
                state.leader_epoch,
                max_bytes,
            )
            if state.fields is None or source != state.built_from:
                state.built_from = source
                state.fields = {
                    "partition": tp[1],
                    "current_leader_epoch": state.leader_epoch,
                    "fetch_offset": source[0],
                    "last_fetched_epoch": source[1],
                    "log_start_offset": source[2],
                    "partition_max_bytes": max_bytes,
                }
            if wanted.get(tp) is not state.fields:
                wanted[tp] = state.fields
                changed.append(tp)
        self._dirty.clear()
        return changed, removed

    async def _fetch(self, conn: Connection) -> None:
        changed, removed = self._update_wanted()
        wanted = self._wanted
        if not wanted:
            await trio.sleep(min(0.1, self.config["replica.fetch.backoff.ms"] / 1000))
            return
        sessions = conn.version_for(ApiKey.FETCH) >= 7
        if sessions:
            fields = self.session.build(wanted, changed, removed)
        else:
            fields = FetchSessionHandler().build(wanted) | {"session_epoch": FINAL_EPOCH}
        body = {
            "replica_id": self.broker_id,
            "max_wait_ms": self.config["replica.fetch.wait.max.ms"],
            "min_bytes": self.config["replica.fetch.min.bytes"],
            "max_bytes": self.config["replica.fetch.response.max.bytes"],
            "isolation_level": 0,
            **fields,
        }
        response = await conn.request(
            ApiKey.FETCH, body, timeout_s=30 + self.config["replica.fetch.wait.max.ms"] / 1000
        )
        if sessions and not self.session.handle_response(response.error_code, response.session_id):
            log.info(
                "fetch session with leader %d: %s; starting a new one",
                self.leader_id,
                ErrorCode(response.error_code).name,
            )
            return
        for t in response.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                fetching = self.partitions.get(tp)
                if fetching is not None and fetching.truncated:
                    self._apply(fetching, p)
                    self._dirty.add(tp)

    def _apply(self, state: FetchState, p) -> None:
        partition = state.partition
        code = ErrorCode(p.error_code)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and partition.log_end_offset < p.log_start_offset:
            log.info(
                "%s-%d: LEO %d is below the leader's log start %d; starting over there",
                *partition.tp,
                partition.log_end_offset,
                p.log_start_offset,
            )
            partition.truncate_fully_and_start_at(p.log_start_offset)
            return
        if code != ErrorCode.NONE:
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                state.truncated = False  # diverged: ask for the epoch's end offset again
                self._untruncated.add(partition.tp)
            log.info("fetch %s-%d from leader %d: %s", *partition.tp, self.leader_id, code.name)
            self._back_off(state)
            return
        try:
            partition.append_records_as_follower(p.records, p.high_watermark, p.log_start_offset)
        except KafkaStorageError as e:  # the log dir failed: it goes offline (and this partition with it)
            log.error("follower append to %s-%d failed: %s", *partition.tp, e)
            self.on_storage_error(e.log_dir)
            return
        except (StorageError, ProtocolError) as e:
            log.warning("follower append to %s-%d failed (%s); truncating again before fetching", *partition.tp, e)
            state.truncated = False
            self._untruncated.add(partition.tp)
            self._back_off(state)
            return
        self.on_change(partition.tp)
