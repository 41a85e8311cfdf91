"""How a partition leader reads and writes its share-partitions' durable state (Kafka's
`DefaultStatePersister` / `PersisterStateManager`, KIP-932): at the share coordinator of each
share-partition, the leader of `__share_group_state` partition `records.partition_for(key)`.

- When that is this broker, the coordinator is called in process; else the request goes to it
  on the inter-broker listener (InitializeShareGroupState key 83 v0, ReadShareGroupState key 84
  v0, WriteShareGroupState key 85 v1, DeleteShareGroupState key 86 v0,
  ReadShareGroupStateSummary key 87 v1),
  one queue and sender per coordinator broker (`broker_queues.BrokerQueues`), the items queued
  together sent as one request per group.
- Besides the leaders, the group coordinator uses it: to initialize a share-partition's state at
  a new state epoch and start offset (AlterShareGroupOffsets) and to delete it
  (DeleteShareGroupOffsets, DeleteGroups).
- The administrators' calls retry a coordinator that is not ready for up to `ADMIN_RETRY_S`.
- No call raises: they answer a `StateResult` whose error is the coordinator's,
  COORDINATOR_NOT_AVAILABLE while `__share_group_state` (created on first need, as FindCoordinator
  creates it) or its leader is missing, or NETWORK_EXCEPTION for a lost connection or an answer
  later than `REQUEST_TIMEOUT_S`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import trio

from broker.broker_queues import BrokerQueues
from coordinator.share import records
from coordinator.share.records import SharePartitionKey, StateBatch, StateWrite
from coordinator.share.shard import StateResult
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import SHARE_GROUP_STATE_TOPIC

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 30.0
#: how long the administrators' calls (summary, initialize, delete) retry a share coordinator
#: that is not ready (`__share_group_state` being created, loading, moving)
ADMIN_RETRY_S = 10.0
_NOT_READY = {ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}


@dataclass(eq=False)
class _Ask:
    """One share-partition's read, summary, write (`write` set), initialization (`initialize`:
    state epoch, start offset) or deletion, waiting for its answer."""

    api: ApiKey
    key: SharePartitionKey
    leader_epoch: int
    write: StateWrite | None = None
    initialize: tuple[int, int] = (0, -1)
    answer: StateResult | None = None
    done: trio.Event = field(default_factory=trio.Event)

    def reply(self, answer: StateResult) -> None:
        if not self.done.is_set():
            self.answer = answer
            self.done.set()

    def partition_body(self) -> dict:
        if self.api == ApiKey.DELETE_SHARE_GROUP_STATE:
            return {"partition": self.key.partition}
        if self.api == ApiKey.INITIALIZE_SHARE_GROUP_STATE:
            state_epoch, start_offset = self.initialize
            return {"partition": self.key.partition, "state_epoch": state_epoch, "start_offset": start_offset}
        body: dict = {"partition": self.key.partition, "leader_epoch": self.leader_epoch}
        if self.write is not None:
            body.update(
                state_epoch=self.write.state_epoch,
                start_offset=self.write.start_offset,
                delivery_complete_count=self.write.delivery_complete_count,
                state_batches=[b._asdict() for b in self.write.batches],
            )
        return body


class SharePersister:
    def __init__(
        self,
        broker_id: int,
        metadata_cache,
        num_partitions: int,
        local,
        ensure_topic: Callable[[], Awaitable[None]],
        client_id: str,
        security=None,
    ) -> None:
        """`num_partitions`: share.coordinator.state.topic.num.partitions; `local`: this broker's
        `ShareCoordinator`; `ensure_topic()`: creates `__share_group_state` when missing."""
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.num_partitions = num_partitions
        self.local = local
        self.ensure_topic = ensure_topic
        self.requests_sent = 0
        self._queues: BrokerQueues[_Ask] = BrokerQueues(
            "share state",
            client_id,
            security,
            self._send,
            lambda ask: ask.reply(StateResult(ErrorCode.NETWORK_EXCEPTION)),
            pipelined=True,
        )

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self._queues.run(task_status=task_status)

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateResult:
        """ReadShareGroupState: the stored state (start offset -1: never written)."""
        return await self._ask(_Ask(ApiKey.READ_SHARE_GROUP_STATE, key, leader_epoch))

    async def read_summary(self, key: SharePartitionKey) -> StateResult:
        """ReadShareGroupStateSummary: start offset, epochs and delivery-complete count, without
        batches (start offset -1: never written)."""
        return await self._retrying(lambda: _Ask(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, key, -1))

    async def write(self, key: SharePartitionKey, write: StateWrite) -> StateResult:
        """WriteShareGroupState: NONE once the coordinator committed it."""
        return await self._ask(_Ask(ApiKey.WRITE_SHARE_GROUP_STATE, key, write.leader_epoch, write))

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StateResult:
        """InitializeShareGroupState: the share-partition starts over at `start_offset` with
        `state_epoch` (which must be newer than the stored one: FENCED_STATE_EPOCH)."""
        return await self._retrying(
            lambda: _Ask(ApiKey.INITIALIZE_SHARE_GROUP_STATE, key, -1, initialize=(state_epoch, start_offset))
        )

    async def delete(self, key: SharePartitionKey) -> StateResult:
        """DeleteShareGroupState: the share-partition's state is gone (NONE when there was none)."""
        return await self._retrying(lambda: _Ask(ApiKey.DELETE_SHARE_GROUP_STATE, key, -1))

    async def _retrying(self, ask: Callable[[], _Ask]) -> StateResult:
        """`_ask`, again while the coordinator is not ready, for up to `ADMIN_RETRY_S`."""
        deadline = trio.current_time() + ADMIN_RETRY_S
        backoff = 0.1
        while True:
            answer = await self._ask(ask())
            if answer.error_code not in _NOT_READY or trio.current_time() + backoff > deadline:
                return answer
            await trio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _ask(self, ask: _Ask) -> StateResult:
        partition = records.partition_for(ask.key, self.num_partitions)
        if SHARE_GROUP_STATE_TOPIC not in self.metadata_cache.partitions:
            await self.ensure_topic()
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_GROUP_STATE_TOPIC} is being created")
        broker = self.metadata_cache.leader_broker(SHARE_GROUP_STATE_TOPIC, partition)
        if broker is None:
            return StateResult(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_GROUP_STATE_TOPIC}-{partition} has no leader"
            )
        if broker.broker_id == self.broker_id and self.local is not None:
            if ask.api == ApiKey.READ_SHARE_GROUP_STATE:
                return await self.local.read_state(ask.key, ask.leader_epoch)
            if ask.api == ApiKey.READ_SHARE_GROUP_STATE_SUMMARY:
                return self.local.read_summary(ask.key, ask.leader_epoch)
            if ask.api == ApiKey.INITIALIZE_SHARE_GROUP_STATE:
                return await self.local.initialize_state(ask.key, *ask.initialize)
            if ask.api == ApiKey.DELETE_SHARE_GROUP_STATE:
                return await self.local.delete_state(ask.key)
            assert ask.write is not None
            return await self.local.write_state(ask.key, ask.write)
        self._queues.put((broker.broker_id, broker.host, broker.port), ask)
        with trio.move_on_after(REQUEST_TIMEOUT_S + 1):
            await ask.done.wait()
        ask.reply(StateResult(ErrorCode.NETWORK_EXCEPTION, "no answer from the share coordinator"))
        assert ask.answer is not None
        return ask.answer

    async def _send(self, conn, batch: list[_Ask]) -> None:
        """The batch as one request per API and group; a partition asked twice (in order) goes
        into the next request."""
        chunks: list[list[_Ask]] = []
        open_chunks: dict[tuple[ApiKey, str], list[_Ask]] = {}
        for ask in batch:
            chunk = open_chunks.get((ask.api, ask.key.group_id))
            if chunk is None or any((a.key.topic_id, a.key.partition) == ask.key[1:] for a in chunk):
                chunk = open_chunks[(ask.api, ask.key.group_id)] = []
                chunks.append(chunk)
            chunk.append(ask)
        try:
            for chunk in chunks:
                await self._request(conn, chunk)
        except BaseException:
            for ask in batch:
                ask.reply(StateResult(ErrorCode.NETWORK_EXCEPTION, "the share coordinator's connection was lost"))
            raise

    async def _request(self, conn, asks: list[_Ask]) -> None:
        """One request for `asks` (one API, one group, each partition once)."""
        api, group_id = asks[0].api, asks[0].key.group_id
        by_topic: dict[uuid.UUID, list[dict]] = {}
        for ask in asks:
            by_topic.setdefault(ask.key.topic_id, []).append(ask.partition_body())
        body = {"group_id": group_id, "topics": [{"topic_id": t, "partitions": p} for t, p in by_topic.items()]}
        self.requests_sent += 1
        version = 1 if api in (ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY) else 0
        response = await conn.request(api, body, version=version, timeout_s=REQUEST_TIMEOUT_S)
        waiting = {(ask.key.topic_id, ask.key.partition): ask for ask in asks}
        for result in response.results:
            for p in result.partitions:
                found = waiting.get((result.topic_id, p.partition))
                if found is None:
                    continue
                batches = [
                    StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in getattr(p, "state_batches", ())
                ]
                found.reply(
                    StateResult(
                        p.error_code,
                        p.error_message,
                        getattr(p, "state_epoch", 0),
                        getattr(p, "leader_epoch", -1),
                        getattr(p, "start_offset", -1),
                        getattr(p, "delivery_complete_count", -1),
                        batches,
                    )
                )
        for ask in asks:
            ask.reply(StateResult(ErrorCode.NETWORK_EXCEPTION, "the share coordinator's answer left it out"))
