"""The late-write scenario (`txn-late-write`, issue 44): a transactional Produce delayed in the
network past its transaction's end, the fault with which Jepsen's 2024 analysis of Kafka's
transaction protocol produced hanging transactions, on a fresh 3-broker cluster:

- the workload: two confluent-kafka transactional producers (transactions of 1-3 sends over the
  chaos topic), a read_committed consumer, and an observer sampling every partition's HW and LSO
  every 0.5 s, recorded in the analysis checker's history format;
- the late writer, a transactional producer speaking the protocol itself (InitProducerId,
  AddPartitionsToTxn, Produce, EndTxn, as a client on Kafka 3.8's transaction protocol does, with
  no epoch bump on abort), reaches the partition's leader through `local_cluster.kafka_proxy`:
  the proxy holds its Produce; the producer aborts the transaction (EndTxn straight to the
  coordinator, the markers are written); `HOLD_S` after the send, past the abort and the
  transaction's timeout, the proxy lets the Produce through;
- the workload runs on `OBSERVE_S` after the release, past the stuck-LSO bound
  (`transaction.timeout.ms` + 15 s), then a final read_committed read closes the history.

With `transaction.partition.verification.enable=true` (KIP-890 part 1) the late batch is refused
(INVALID_TXN_STATE) and every anomaly class of `chaos.analysis_checker` counts 0. With it false the
batch opens a transaction nothing will end: the checker's "stuck LSO" counts it, `find_hanging`
lists it, and `abort_transaction` ends it (what `minikafka transactions find-hanging` / `abort`
do). The workload time is bounded by HOLD_S + OBSERVE_S (about 40 s), long enough for the bound
to pass.

(A confluent-kafka producer cannot be made to do this: librdkafka bumps the epoch (KIP-360) when
it aborts a transaction with a Produce in flight, and the abort markers at the new epoch fence the
late batch at the partition whatever the broker's setting.)
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from chaos.analysis import _consumer, _delivered, _final_read
from chaos.analysis_checker import AnalysisReport, check
from chaos.runner import PARTITIONS, TOPIC, Env, create_topic, start_env, stop_env
from chaos.transactions import new_transactional_producer
from client import Cluster, ConnectionClosed, KafkaError
from client.connection import Connection
from client.reads import LATEST, READ_COMMITTED, list_offset
from client.transactions import abort_transaction, find_hanging
from local_cluster.kafka_proxy import KafkaProxy
from local_cluster.zookeeper import ZooKeeperProcess
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

NAME = "txn-late-write"
TXN_TIMEOUT_MS = 8000  # both producers' transaction.timeout.ms
LATE_ID, LATE_TXN = "late-writer", "late-1"  # the late writer's transactional id, its transaction
HOLD_S = 10.0  # the held Produce arrives this long after it was sent: past the abort
BOUND_S = TXN_TIMEOUT_MS / 1000 + 15  # the stuck-LSO bound
OBSERVE_S = BOUND_S + 8
TIMEOUT = 30
EXTRA = {
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}


@dataclass
class LateWriteReport:
    analysis: AnalysisReport
    verification: bool
    held: bool  # the proxy caught and delivered a late transactional Produce
    hanging_found: list  # what find_hanging listed after the run
    hanging_left: list  # what it listed after abort_transaction of each
    errors: list = field(default_factory=list)  # the producers' first errors (KafkaException texts)

    @property
    def ok(self) -> bool:
        """Verification on: no anomaly. Off: the late write hangs a partition (the check can fail),
        and the operators' tools find it and end it."""
        if not self.held:
            return False
        if self.verification:
            return self.analysis.ok and not self.hanging_found
        return self.analysis.counts["stuck LSO"] > 0 and bool(self.hanging_found) and not self.hanging_left


def _producer(
    env: Env,
    bootstrap: str,
    name: str,
    rng: random.Random,
    stop: threading.Event,
    **config,
) -> None:
    """Transactions of 1-3 sends (blocking; a thread), recorded for the analysis checker."""
    from confluent_kafka import KafkaException

    def new_producer():
        return new_transactional_producer(
            bootstrap, f"late-{name}", stop, **{"transaction.timeout.ms": TXN_TIMEOUT_MS} | config
        )

    producer = new_producer()
    txn = 0
    while producer is not None and not stop.is_set():
        txn += 1
        tid = f"{name}{txn}"
        try:
            producer.begin_transaction()
            for i in range(rng.randint(1, 3)):
                value, partition = f"{tid}-{i}", rng.randrange(PARTITIONS)
                env.record(op="send", value=value, partition=partition, txn=tid)
                producer.produce(TOPIC, value=value.encode(), partition=partition, on_delivery=_delivered(env))
            producer.commit_transaction(TIMEOUT)
            env.record(op="txn", txn=tid, outcome="commit")
        except KafkaException as e:
            error = e.args[0]
            env.record(op="error", producer=name, txn=tid, error=str(error))
            if error.txn_requires_abort() and not error.fatal():
                try:
                    producer.abort_transaction(TIMEOUT)
                    env.record(op="txn", txn=tid, outcome="abort")
                    continue
                except KafkaException as again:
                    env.record(op="error", producer=name, txn=tid, error=f"abort: {again.args[0]}")
            env.record(op="txn", txn=tid, outcome="unknown")
            producer = new_producer()
        time.sleep(0.05)


async def _observe(env: Env, stop: trio.Event) -> None:
    """Every partition's HW and LSO every 0.5 s, as `offsets` events."""
    async with Cluster.open(env.bootstrap, retries=30) as cluster:
        while not stop.is_set():
            for p in range(PARTITIONS):
                try:
                    hw = await list_offset(cluster, TOPIC, p, LATEST)
                    lso = await list_offset(cluster, TOPIC, p, LATEST, READ_COMMITTED)
                except (KafkaError, ConnectionClosed, trio.TooSlowError):
                    continue
                env.record(op="offsets", partition=p, hw=hw, lso=lso, at_s=time.monotonic())
            await trio.sleep(0.5)


async def _led_by(env: Env, broker_id: int | None) -> set[int]:
    md = await env.metadata()
    return {p.partition_index for p in md.topics[0].partitions if p.leader_id == broker_id} if md else set()


async def _coordinator(env: Env, transactional_id: str) -> int:
    async with Cluster.open(env.bootstrap, retries=30) as cluster:
        with trio.fail_after(30):
            while True:  # the first ask creates __transaction_state
                conn = await cluster.any_connection()
                found = await conn.request(ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1}, version=2)
                if found.error_code == 0:
                    return found.node_id
                await trio.sleep(0.2)


async def _until_ok(request, what: str):
    """Retry a coordinator request while it answers a retriable error (a loading coordinator,
    CONCURRENT_TRANSACTIONS)."""
    with trio.fail_after(30):
        while True:
            answer = await request()
            code = getattr(answer, "error_code", None)
            if code is None:
                code = answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            if code == ErrorCode.NONE:
                return answer
            if code not in (
                ErrorCode.CONCURRENT_TRANSACTIONS,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ):
                raise KafkaError(code, what)
            await trio.sleep(0.1)


async def _late_write(env: Env, proxy: KafkaProxy, victim: int) -> int:
    """The late writer (see the module docstring); returns the late Produce's error code."""
    coordinator_id = await _coordinator(env, LATE_ID)
    leader_id = await env.leader_of(victim)
    c = env.brokers[coordinator_id]
    async with (
        Connection.open(c.host, c.port) as coordinator,
        Connection.open("127.0.0.1", proxy.ports[leader_id]) as leader,
    ):
        init = await _until_ok(
            lambda: coordinator.request(
                ApiKey.INIT_PRODUCER_ID,
                {"transactional_id": LATE_ID, "transaction_timeout_ms": TXN_TIMEOUT_MS},
                version=1,
            ),
            "InitProducerId",
        )
        pid, epoch = init.producer_id, init.producer_epoch
        ids = {"producer_id": pid, "producer_epoch": epoch}
        await _until_ok(
            lambda: coordinator.request(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                {
                    "v3_and_below_transactional_id": LATE_ID,
                    "v3_and_below_producer_id": pid,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": TOPIC, "partitions": [victim]}],
                },
                version=3,
            ),
            "AddPartitionsToTxn",
        )
        value = "late-0"
        batch = rb.build_batch(
            [(None, value.encode())], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
        )
        env.record(op="send", value=value, partition=victim, txn=LATE_TXN)
        proxy.hold(TOPIC, victim)
        pending = await leader.send(
            ApiKey.PRODUCE,
            {
                "transactional_id": LATE_ID,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": victim, "records": batch}]}],
            },
        )
        with trio.fail_after(10):
            await proxy.held.wait()
        await trio.sleep(1)
        await _until_ok(
            lambda: coordinator.request(ApiKey.END_TXN, {"transactional_id": LATE_ID, **ids, "committed": False}),
            "EndTxn",
        )
        env.record(op="txn", txn=LATE_TXN, outcome="abort")
        await trio.sleep(HOLD_S - 1)
        proxy.release()
        answer = await leader.wait(pending, 40)
        p = answer.responses[0].partition_responses[0]
        if p.error_code == ErrorCode.NONE:
            env.record(op="delivered", value=value, partition=victim, offset=p.base_offset)
        return p.error_code


async def _hanging(env: Env) -> list[dict]:
    async with Cluster.open(env.bootstrap, retries=30) as cluster:
        return await find_hanging(
            cluster, topic=TOPIC, max_transaction_timeout_ms=TXN_TIMEOUT_MS, now_ms=int(time.time() * 1000)
        )


async def _abort_all(env: Env, hanging: list[dict]) -> None:
    async with Cluster.open(env.bootstrap, retries=30) as cluster:
        for h in hanging:
            await abort_transaction(
                cluster,
                h["topic"],
                h["partition"],
                h["producer_id"],
                h["producer_epoch"],
                max(h["coordinator_epoch"], 0),
            )


async def _workload(
    env: Env, proxy: KafkaProxy, seed: int, victim: int, verification: bool
) -> tuple[int, list[dict], list[dict]]:
    """The producers, the consumer and the observer; the late write after 3 s; then OBSERVE_S of
    workload, the hanging transactions found (and, without verification, aborted) and found
    again. Returns (the late Produce's error code, hanging found, hanging left). Each task is told
    to stop; their nursery waits for them (at most 60 s: a client blocked past its own timeouts is
    abandoned)."""
    stop_producers, stop_consumer, stop_observer = threading.Event(), threading.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        for name in ("S", "T"):
            args = (env.bootstrap, name, random.Random(f"{seed}-{name}"), stop_producers)
            nursery.start_soon(lambda args=args: trio.to_thread.run_sync(_producer, env, *args, abandon_on_cancel=True))
        nursery.start_soon(
            lambda: trio.to_thread.run_sync(_consumer, env, "assign", stop_consumer, abandon_on_cancel=True)
        )
        nursery.start_soon(_observe, env, stop_observer)
        await trio.sleep(3)
        late_code = await _late_write(env, proxy, victim)
        await trio.sleep(OBSERVE_S)
        stop_producers.set()
        await trio.sleep(3)
        hanging = await _hanging(env)
        if hanging and not verification:
            await _abort_all(env, hanging)  # what `minikafka transactions abort` does
        await trio.sleep(2)
        left = await _hanging(env)
        stop_consumer.set()
        stop_observer.set()
        nursery.cancel_scope.deadline = trio.current_time() + 60
    return late_code, hanging, left


async def run_late_write_scenario(seed: int, root: Path, verification: bool = True) -> tuple[LateWriteReport, str]:
    directory = root / f"{NAME}-{'on' if verification else 'off'}"
    directory.mkdir(parents=True)
    zk = ZooKeeperProcess.start(directory / "zk")
    rng = random.Random(f"{seed}-{NAME}")
    extra = EXTRA | {"transaction.partition.verification.enable": "true" if verification else "false"}
    env = await start_env(directory, zk, rng, extra)
    try:
        await create_topic(env)
        proxy = KafkaProxy({i: (b.host, b.port) for i, b in env.brokers.items()})
        env.record(op="bound", lso_s=BOUND_S)
        victim = rng.randrange(PARTITIONS)
        async with trio.open_nursery() as proxied:  # the proxy serves until the workload ends
            await proxied.start(proxy.run)
            late_code, hanging, left = await _workload(env, proxy, seed, victim, verification)
            proxied.cancel_scope.cancel()
        await trio.to_thread.run_sync(_final_read, env)
        report = LateWriteReport(check(env.history), verification, proxy.delivered.is_set(), hanging, left)
        report.errors = [e["error"] for e in env.history if e["op"] == "error"][:10]
        what = (
            f"held producer {proxy.held_producer}'s Produce to {TOPIC}-{victim} for {HOLD_S:.0f} s, "
            f"answered {ErrorCode(late_code).name} "
            f"(verification {'on' if verification else 'off'}); hanging found {len(hanging)}, left {len(left)}"
        )
        return report, what
    finally:
        stop_env(env)
