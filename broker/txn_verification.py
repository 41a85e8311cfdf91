"""Transaction verification from a partition leader (KIP-890 part 1; Kafka's
`AddPartitionsToTxnManager`): before the first transactional batch of a producer's transaction is
appended to a partition, the leader asks the transaction coordinator whether that partition is in
the producer's ongoing transaction at that epoch. `transaction.partition.verification.enable`
(dynamic, default true) turns it on; off, transactional produces append as before.

- The coordinator of a transactional id is the leader of its `__transaction_state` partition in
  the metadata cache. When that is this broker, its coordinator answers in-process; otherwise the
  question goes out as AddPartitionsToTxn v4 with `VerifyOnly=true`, batched: one sender task per
  coordinator broker drains every question queued meanwhile into one request (pipelined: several
  may be in flight on its connection, where Kafka waits for each answer), the transactions in
  its `Transactions` array (Kafka's per-node `TransactionDataAndCallbacks`). Questions for the
  same transactional id in one batch are asked as one entry (its map key): at the same epoch their
  partitions together (Kafka answers the earlier one NETWORK_EXCEPTION instead, and the producer
  retries), and an older epoch is answered INVALID_PRODUCER_EPOCH, as Kafka does.
- Answers per partition, turned into what a producer expects (Kafka's
  `ReplicaManager.appendRecords` verification callback): PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH;
  CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
  (and no known coordinator), and NETWORK_EXCEPTION (a lost connection to the coordinator, a
  timeout, or a question Kafka answers so) -> NOT_ENOUGH_REPLICAS, which every producer retries
  without a metadata refresh (Kafka 3.9+; 3.8 passed NETWORK_EXCEPTION through, and librdkafka
  then fails the whole transaction: a coordinator's death became an abort); INVALID_TXN_STATE
  ("not part of the transaction") and the others as they are; a top-level
  CLUSTER_AUTHORIZATION_FAILED -> INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.broker_queues import BrokerQueues
from client.connection import Connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import TRANSACTION_STATE_TOPIC
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 30.0
_RETRIABLE = {
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}


def producer_error(code: ErrorCode) -> ErrorCode:
    """A coordinator's verification answer as the producer's Produce error."""
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


class _Question:
    """One transaction's partitions to verify, and their answer (partition -> coordinator code)."""

    def __init__(self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = partitions
        self.answers: dict[TopicPartition, ErrorCode] = {}
        self.done = trio.Event()

    def answer_all(self, code: ErrorCode) -> None:
        if not self.done.is_set():
            self.answers = dict.fromkeys(self.partitions, code)
            self.done.set()

    def body(self) -> dict:
        topics: dict[str, list[int]] = {}
        for topic, index in self.partitions:
            topics.setdefault(topic, []).append(index)
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }


class AddPartitionsToTxnManager:
    """`verify` answers whether partitions are in a producer's ongoing transaction (see the module
    docstring). `broker_id`: this broker; `partition_for`: transactional id -> its
    `__transaction_state` partition; `local`: this broker's coordinator's `verify_partitions`
    (None without one); `security`: the inter-broker listener's ClientSecurity."""

    def __init__(
        self,
        broker_id: int,
        metadata_cache,
        partition_for: Callable[[str], int],
        local: Callable[[str, int, int, list[TopicPartition]], dict[TopicPartition, ErrorCode]] | None,
        client_id: str,
        security=None,
    ):
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.partition_for = partition_for
        self.local = local
        self.enabled = True  # transaction.partition.verification.enable (applied live)
        self.requests_sent = 0  # AddPartitionsToTxn v4 requests sent (tests, metrics)
        #: producer id -> set once its latest held Produce here has appended: a producer's later
        #: requests wait for it, so its batches reach each log in the order they were sent
        self.appending: dict[int, trio.Event] = {}
        # what waits for a broker that cannot be reached is answered: the producer retries
        self._queues: BrokerQueues[_Question] = BrokerQueues(
            "transaction verification",
            client_id,
            security,
            self._send,
            lambda q: q.answer_all(ErrorCode.NETWORK_EXCEPTION),
            pipelined=True,
        )

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        await self._queues.run(task_status=task_status)

    def start_soon(self, fn, *args) -> None:
        """Run a verifying produce beside the senders (the Produce handler answers inline)."""
        self._queues.start_soon(fn, *args)

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Partition -> the producer's error for every partition that is not verified (absent:
        verified). Never raises for a coordinator's answer or a lost connection."""
        broker = self.metadata_cache.leader_broker(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        if broker is None:
            answers = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif broker.broker_id == self.broker_id and self.local is not None:
            answers = self.local(transactional_id, producer_id, producer_epoch, partitions)
        else:
            question = _Question(transactional_id, producer_id, producer_epoch, partitions)
            self._queues.put((broker.broker_id, broker.host, broker.port), question)
            with trio.move_on_after(REQUEST_TIMEOUT_S + 1):
                await question.done.wait()
            if not question.done.is_set():
                question.answer_all(ErrorCode.NETWORK_EXCEPTION)
            answers = question.answers
        return {tp: producer_error(code) for tp, code in answers.items() if code != ErrorCode.NONE}

    async def _send(self, conn: Connection, batch: list[_Question]) -> None:
        groups: dict[str, list[_Question]] = {}  # one request entry per transactional id (its mapKey)
        for q in batch:
            same = groups.setdefault(q.transactional_id, [])
            if same and same[0].producer_epoch > q.producer_epoch:
                q.answer_all(ErrorCode.INVALID_PRODUCER_EPOCH)  # fenced by the newer question
                continue
            if same and same[0].producer_epoch < q.producer_epoch:
                for old in same:
                    old.answer_all(ErrorCode.INVALID_PRODUCER_EPOCH)
                same.clear()
            same.append(q)  # same epoch: the partitions are asked together
        entries = []
        for questions in groups.values():
            if questions:
                first = questions[0]
                wanted = sorted({tp for q in questions for tp in q.partitions})
                entries.append(
                    _Question(first.transactional_id, first.producer_id, first.producer_epoch, wanted).body()
                )
        if not entries:
            return
        self.requests_sent += 1
        try:
            response = await conn.request(
                ApiKey.ADD_PARTITIONS_TO_TXN, {"transactions": entries}, version=4, timeout_s=REQUEST_TIMEOUT_S
            )
        except BaseException:
            for questions in groups.values():
                for q in questions:
                    q.answer_all(ErrorCode.NETWORK_EXCEPTION)
            raise
        if response.error_code != ErrorCode.NONE:
            code = ErrorCode(response.error_code)
            for questions in groups.values():
                for q in questions:
                    q.answer_all(
                        ErrorCode.INVALID_TXN_STATE if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else code
                    )
            return
        for result in response.results_by_transaction:
            answers = {
                (topic.name, p.partition_index): ErrorCode(p.partition_error_code)
                for topic in result.topic_results
                for p in topic.results_by_partition
            }
            for q in groups.get(result.transactional_id, []):
                if not q.done.is_set():
                    q.answers = {tp: answers.get(tp, ErrorCode.NETWORK_EXCEPTION) for tp in q.partitions}
                    q.done.set()
        for questions in groups.values():
            for q in questions:
                q.answer_all(ErrorCode.NETWORK_EXCEPTION)  # a transaction the answer left out
