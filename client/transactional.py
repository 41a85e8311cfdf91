"""The producer's side of a transaction (KIP-98), for one `transactional.id`: the requests
Kafka's `TransactionManager` sends, without the batching (that stays in `client/producer.py`).

- InitProducerId v4 (key 22) to the id's coordinator (FindCoordinator v3, key type 1): fences
  earlier producers with the id and completes (aborts) a transaction they left open; answered
  CONCURRENT_TRANSACTIONS while that completes, which is retried;
- AddPartitionsToTxn v3 (key 24) before a partition's first batch of each transaction;
- AddOffsetsToTxn v3 (key 25) then TxnOffsetCommit v3 (key 28, to the group's coordinator):
  consumer offsets that become visible with the transaction's commit;
- EndTxn v3 (key 26): commit or abort.

Errors: coordinator moves and loads (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a broken connection) and CONCURRENT_TRANSACTIONS are retried via
`Cluster.retry`; PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and authorization errors raise
KafkaError and are fatal for the producer (a newer one owns the id).
"""

from __future__ import annotations

from typing import Any

from client.cluster import Cluster, KafkaError
from client.groups import coordinator_connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    }
)


class _Retry(KafkaError):
    """CONCURRENT_TRANSACTIONS: Kafka's client retries it although the error is not retriable."""

    @property
    def retriable(self) -> bool:
        return True


def _check(code: int, where: str) -> None:
    if code == ErrorCode.CONCURRENT_TRANSACTIONS:
        raise _Retry(code, where)
    if code != ErrorCode.NONE:
        raise KafkaError(code, where)


class TransactionManager:
    """State of one transactional id: producer id and epoch, whether a transaction is open, the
    partitions it has added, and the first error that makes it abortable."""

    def __init__(self, cluster: Cluster, transactional_id: str, timeout_ms: int = 60000):
        self.cluster, self.transactional_id, self.timeout_ms = cluster, transactional_id, timeout_ms
        self.producer_id, self.epoch = -1, -1
        self.in_transaction = False
        self.partitions: set[TopicPartition] = set()
        self.groups: set[str] = set()  # groups whose offsets this transaction commits
        self.abortable: KafkaError | None = None  # a batch failed: only abort is possible
        self.fatal: KafkaError | None = None

    async def _call(self, api_key: int, body: dict, version: int, check) -> Any:
        async def attempt(refresh: bool):
            conn = await coordinator_connection(self.cluster, self.transactional_id, refresh, key_type=1)
            response = await conn.request(api_key, body, version=version)
            check(response)
            return response

        try:
            return await self.cluster.retry(attempt, ApiKey(api_key).name)
        except KafkaError as e:
            if e.error_code in FATAL:
                self.fatal = e
            raise

    async def init(self) -> tuple[int, int]:
        """InitProducerId: (producer id, epoch); a new epoch each call."""
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.timeout_ms,
            "producer_id": -1,
            "producer_epoch": -1,
        }
        r = await self._call(ApiKey.INIT_PRODUCER_ID, body, 4, lambda r: _check(r.error_code, "InitProducerId"))
        self.producer_id, self.epoch = r.producer_id, r.producer_epoch
        self.in_transaction, self.partitions, self.groups, self.abortable = False, set(), set(), None
        return self.producer_id, self.epoch

    def begin(self) -> None:
        """Raises KafkaError after a fatal error; RuntimeError if a transaction is open."""
        if self.fatal is not None:
            raise self.fatal
        if self.in_transaction:
            raise RuntimeError("a transaction is already open: commit or abort it first")
        self.in_transaction, self.partitions, self.groups, self.abortable = True, set(), set(), None

    def _require_open(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if not self.in_transaction:
            raise RuntimeError("no transaction is open: call begin_transaction() first")
        if self.abortable is not None:
            raise self.abortable

    async def add_partition(self, tp: TopicPartition) -> None:
        """Before the first record to `tp` in this transaction."""
        self._require_open()
        if tp in self.partitions:
            return
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": tp[0], "partitions": [tp[1]]}],
        }

        def check(r):
            for t in r.results_by_topic_v3_and_below:
                for p in t.results_by_partition:
                    _check(p.partition_error_code, f"AddPartitionsToTxn {t.name}-{p.partition_index}")

        await self._call(ApiKey.ADD_PARTITIONS_TO_TXN, body, 3, check)
        self.partitions.add(tp)

    async def send_offsets(self, offsets: dict[TopicPartition, int], group_id: str, metadata: str = "") -> None:
        """Commit `offsets` for `group_id` as part of this transaction (AddOffsetsToTxn, then
        TxnOffsetCommit as a "simple" member: generation -1, as a producer outside the group)."""
        self._require_open()
        ids = {"transactional_id": self.transactional_id, "producer_id": self.producer_id}
        body = {**ids, "producer_epoch": self.epoch, "group_id": group_id}
        await self._call(ApiKey.ADD_OFFSETS_TO_TXN, body, 3, lambda r: _check(r.error_code, "AddOffsetsToTxn"))
        self.groups.add(group_id)
        topics: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": metadata,
                }
            )
        commit = {
            **body,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def check(r):
            for t in r.topics:
                for p in t.partitions:
                    _check(p.error_code, f"TxnOffsetCommit {t.name}-{p.partition_index}")

        async def attempt(refresh: bool):
            conn = await coordinator_connection(self.cluster, group_id, refresh)
            check(await conn.request(ApiKey.TXN_OFFSET_COMMIT, commit, version=3))

        await self.cluster.retry(attempt, "TxnOffsetCommit")

    async def end(self, commit: bool) -> None:
        """EndTxn; a transaction that added nothing needs no request."""
        if self.fatal is not None:
            raise self.fatal
        if not self.in_transaction:
            raise RuntimeError("no transaction is open")
        if commit and self.abortable is not None:
            raise self.abortable
        if self.partitions or self.groups:
            body = {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "committed": commit,
            }
            await self._call(ApiKey.END_TXN, body, 3, lambda r: _check(r.error_code, "EndTxn"))
        self.in_transaction, self.partitions, self.groups = False, set(), set()
