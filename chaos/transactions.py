"""The transactional chaos scenario (`txn-kill-coordinator-and-leader`, in `make chaos`): a real 3-broker cluster
(`__transaction_state` with 3 partitions, RF 3, min ISR 2; the chaos topic RF 3, min ISR 2) while
two confluent-kafka transactional producers run transactions of 1-10 records over the chaos
topic's partitions (one in five aborted on purpose), an observer records every partition's LSO
(ListOffsets read_committed) every 200 ms, and the nemesis kills -9 the transaction coordinator of
one producer, then the leader of a partition, then both at once, each restarted seconds later.

After the heal, once every open transaction was decided (LSO = HW everywhere), every partition is
read read_committed from its start and `chaos.txn_checker` judges atomicity, aborted records, lost
commits, duplicates and the LSO's monotonicity.
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import trio

from chaos import liveness
from chaos.runner import PARTITIONS, TOPIC, TXN_SCENARIO, Env, create_topic, heal_and_judge, start_env, stop_env
from chaos.txn_checker import TxnReport, check_transactions
from client import Cluster, ConnectionClosed, KafkaError
from client.reads import EARLIEST, LATEST, READ_COMMITTED, fetch, list_offset, reader_batches
from local_cluster.zookeeper import ZooKeeperProcess
from protocol import record_batch as rb

NAME = TXN_SCENARIO
PRODUCERS = ("tp1", "tp2")
EXTRA = {
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
ERRORS = (KafkaError, ConnectionClosed, trio.TooSlowError)
TRANSACTION_TIMEOUT_MS = 10_000  # the producers' transaction.timeout.ms


def new_transactional_producer(bootstrap: str, transactional_id: str, stop: threading.Event, **config):
    """A confluent-kafka transactional producer whose `init_transactions` succeeded (retried
    until it does), or None once `stop` is set (blocking; for the workloads' threads)."""
    from confluent_kafka import KafkaException, Producer

    while not stop.is_set():
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 2} | config)
        try:
            p.init_transactions(30)
            return p
        except KafkaException:
            continue
    return None


def producer_loop(env: Env, name: str, seed: str, stop: threading.Event) -> None:
    """One transactional producer (blocking; runs in a thread)."""
    from confluent_kafka import KafkaException

    rng = random.Random(seed)

    def new_producer():
        return new_transactional_producer(
            env.bootstrap, f"chaos-{name}", stop, **{"transaction.timeout.ms": TRANSACTION_TIMEOUT_MS}
        )

    producer = new_producer()
    txn = 0
    while producer is not None and not stop.is_set():
        txid, n = f"{name}-{txn}", rng.randint(1, 10)
        txn += 1
        abort = rng.random() < 0.2
        env.record(op="txn_begin", txn=txid, n=n)
        outcome = "unknown"
        try:
            producer.begin_transaction()
            for i in range(n):
                producer.produce(TOPIC, value=f"{txid}:{i}".encode(), partition=rng.randrange(PARTITIONS))
            if abort:
                producer.abort_transaction(30)
                outcome = "aborted"
            else:
                producer.commit_transaction(30)
                outcome = "committed"
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                try:
                    producer.abort_transaction(30)
                    outcome = "aborted"
                except KafkaException:
                    producer = new_producer()
            else:  # fatal, or a retriable error we do not retry: a new instance fences this one
                producer = new_producer()
        env.record(op="txn_end", txn=txid, outcome=outcome)


async def lso_observer(env: Env, stop: trio.Event) -> None:
    async with Cluster.open(env.bootstrap, retries=2, backoff_ms=50) as cluster:
        while not stop.is_set():
            for p in range(PARTITIONS):
                try:
                    with trio.fail_after(2):
                        offset = await list_offset(cluster, TOPIC, p, LATEST, READ_COMMITTED)
                    env.record(op="lso", partition=p, offset=offset)
                except ERRORS:
                    pass
            await trio.sleep(0.2)


async def _coordinator_of(env: Env, transactional_id: str) -> int:
    from client.transactions import describe_transaction

    async with Cluster.open(env.bootstrap, retries=10) as cluster:
        return (await describe_transaction(cluster, transactional_id))["coordinator"]


async def nemesis(env: Env) -> str:
    done = []
    for step in ("coordinator", "leader", "both"):
        victims = set()
        if step in ("coordinator", "both"):
            victims.add(await _coordinator_of(env, f"chaos-{env.rng.choice(PRODUCERS)}"))
        if step in ("leader", "both"):
            victims.add(await env.leader_of(env.rng.randrange(PARTITIONS)))
        victims.discard(-1)
        for v in victims:
            env.brokers[v].kill()
        done.append(f"{step}: killed {sorted(victims)}")
        await trio.sleep(env.rng.uniform(2, 4))
        for v in victims:
            await env.restart(v)
        await trio.sleep(3)
    return "; ".join(done)


async def read_committed_values(env: Env, timeout_s: float = 60) -> dict[str, int]:
    """Once every transaction is decided (LSO = HW), every value read_committed shows."""
    seen: dict[str, int] = {}
    async with Cluster.open(env.bootstrap, retries=30) as cluster:
        with trio.move_on_after(timeout_s):
            while True:
                ends = [await list_offset(cluster, TOPIC, p, LATEST) for p in range(PARTITIONS)]
                stable = [await list_offset(cluster, TOPIC, p, LATEST, READ_COMMITTED) for p in range(PARTITIONS)]
                if ends == stable:
                    break
                await trio.sleep(0.5)
        for p in range(PARTITIONS):
            position = await list_offset(cluster, TOPIC, p, EARLIEST)
            end = await list_offset(cluster, TOPIC, p, LATEST, READ_COMMITTED)
            env.record(op="final_read", partition=p, start=position, end=end)
            while position < end:
                fetched = await fetch(
                    cluster, TOPIC, p, position, max_wait_ms=100, max_bytes=1 << 20, isolation_level=READ_COMMITTED
                )
                for pos, header, visible in reader_batches(fetched.records, fetched.aborted):
                    for r in rb.decode_records(fetched.records, pos, header) if visible else ():
                        if position <= r.offset < end and r.value is not None:
                            seen[r.value.decode()] = seen.get(r.value.decode(), 0) + 1
                    position = max(position, header.next_offset)
                if not fetched.records and fetched.last_stable_offset >= end:
                    break
    return seen


async def run_txn_scenario(seed: int, root: Path, workload_s: float = 20.0) -> tuple[TxnReport, str]:
    directory = root / NAME
    directory.mkdir(parents=True)
    zk = ZooKeeperProcess.start(directory / "zk")
    env = await start_env(directory, zk, random.Random(f"{seed}-{NAME}"), EXTRA)
    try:
        await create_topic(env)
        stop_producers = threading.Event()
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            for name in PRODUCERS:
                nursery.start_soon(
                    lambda name=name: trio.to_thread.run_sync(
                        producer_loop, env, name, f"{seed}-{name}", stop_producers, abandon_on_cancel=True
                    )
                )
            nursery.start_soon(lso_observer, env, stop)
            await trio.sleep(3)
            what = await nemesis(env)
            await trio.sleep(max(0.0, workload_s - 3))
            judged = await heal_and_judge(env)
            stop_producers.set()
            stopped_at = trio.current_time()
            await trio.sleep(1)
            stop.set()
            nursery.cancel_scope.deadline = trio.current_time() + 60
        judged.txn_measured = True
        judged.txn_s = await liveness.transactions_decided(
            env, TOPIC, PARTITIONS, stopped_at, TRANSACTION_TIMEOUT_MS / 1000 + 15
        )
        visible = await read_committed_values(env)
        (directory / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in env.history))
        report = check_transactions(env.history, visible)
        report.liveness = judged
        return report, what
    finally:
        stop_env(env)
