"""The analysis-style chaos scenario (`analysis-mixed-workload`, in `make chaos`): on a fresh
3-broker cluster, confluent-kafka clients as the public analyses of Kafka-compatible systems run
them, while the nemesis kills a random broker and then the controller (each restarted):

- a transactional producer (transactions of 1-4 sends over the chaos topic's partitions, one in
  five aborted on purpose) and a plain idempotent producer (acks=all), both recording sends and
  delivery reports (the offset each value got);
- an assign consumer (every partition from the start) and a subscribe consumer (a group), both
  read_committed, recording every polled record and every new assignment;
- after the heal the producers stop, the consumers read on until they reach the end offsets, and
  a final read_committed read of every partition closes the history.

`chaos.analysis_checker` counts each anomaly class, zero or not; the scenario is judged for
liveness like the others.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import trio

from chaos.analysis_checker import AnalysisReport, check
from chaos.runner import ANALYSIS_SCENARIO, PARTITIONS, TOPIC, Env, create_topic, heal_and_judge, start_env, stop_env
from chaos.transactions import new_transactional_producer
from local_cluster.zookeeper import ZooKeeperProcess

NAME = ANALYSIS_SCENARIO
TIMEOUT = 30


def _transactional(env: Env, rng: random.Random, stop: threading.Event) -> None:
    from confluent_kafka import KafkaException

    txn = 0

    def new_producer():
        return new_transactional_producer(env.bootstrap, "analysis-t", stop)

    producer = new_producer()
    while producer is not None and not stop.is_set():
        txn += 1
        commit = rng.random() >= 0.2
        try:
            producer.begin_transaction()
            for i in range(rng.randint(1, 4)):
                value, partition = f"t{txn}-{i}", rng.randrange(PARTITIONS)
                env.record(op="send", value=value, partition=partition, txn=txn)
                producer.produce(TOPIC, value=value.encode(), partition=partition, on_delivery=_delivered(env))
            if commit:
                producer.commit_transaction(TIMEOUT)
            else:
                producer.abort_transaction(TIMEOUT)
            env.record(op="txn", txn=txn, outcome="commit" if commit else "abort")
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort() and not error.fatal():
                try:
                    producer.abort_transaction(TIMEOUT)
                    env.record(op="txn", txn=txn, outcome="abort")
                    continue
                except KafkaException:
                    pass
            env.record(op="txn", txn=txn, outcome="unknown")
            producer = new_producer()


def _plain(env: Env, rng: random.Random, stop: threading.Event) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": env.bootstrap, "acks": "all", "enable.idempotence": True})
    n = 0
    while not stop.is_set():
        n += 1
        value, partition = f"p{n}", rng.randrange(PARTITIONS)
        env.record(op="send", value=value, partition=partition, txn=None)
        producer.produce(TOPIC, value=value.encode(), partition=partition, on_delivery=_delivered(env))
        producer.poll(0.002)
    producer.flush(TIMEOUT)


def _delivered(env: Env):
    def report(err, msg) -> None:
        if err is None:
            env.record(op="delivered", value=msg.value().decode(), partition=msg.partition(), offset=msg.offset())

    return report


def _consumer(env: Env, name: str, stop: threading.Event) -> None:
    """Poll until `stop`, then on until every partition's position reached its end offset."""
    from confluent_kafka import Consumer, TopicPartition

    config = {
        "bootstrap.servers": env.bootstrap,
        "group.id": f"analysis-{name}",
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
    }
    consumer = Consumer(config)
    if name == "assign":
        env.record(op="assign", consumer=name)
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    else:
        consumer.subscribe([TOPIC], on_assign=lambda c, parts: env.record(op="assign", consumer=name))
    deadline = None
    try:
        while True:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                env.record(
                    op="poll", consumer=name, partition=msg.partition(), offset=msg.offset(), value=msg.value().decode()
                )
            if stop.is_set():
                deadline = deadline or time.monotonic() + 30
                if time.monotonic() > deadline or _caught_up(consumer):
                    return
    finally:
        consumer.close()


def _caught_up(consumer) -> bool:
    from confluent_kafka import TopicPartition

    assignment = consumer.assignment()
    if len(assignment) < PARTITIONS:
        return False
    for tp in consumer.position(assignment):
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, tp.partition), timeout=5)
        if tp.offset < high:
            return False
    return True


def _final_read(env: Env) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": env.bootstrap, "group.id": "analysis-final", "isolation.level": "read_committed"}
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=TIMEOUT)[1] for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        idle = time.monotonic()
        while any(end > 0 for end in ends.values()) and time.monotonic() - idle < 5:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            idle = time.monotonic()
            env.record(op="final", partition=msg.partition(), offset=msg.offset(), value=msg.value().decode())
            if msg.offset() + 1 >= ends[msg.partition()]:
                ends[msg.partition()] = 0
    finally:
        consumer.close()


async def _nemesis(env: Env) -> str:
    victim = env.rng.choice(list(env.brokers))
    env.brokers[victim].kill()
    await trio.sleep(env.rng.uniform(2, 4))
    await env.restart(victim)
    await trio.sleep(3)
    controller = await env.controller()
    if controller >= 0:
        env.brokers[controller].kill()
        await trio.sleep(env.rng.uniform(2, 4))
        await env.restart(controller)
    return f"killed broker {victim}, then the controller {controller} (each restarted)"


async def run_analysis_scenario(seed: int, root: Path, workload_s: float = 15.0) -> tuple[AnalysisReport, str]:
    directory = root / NAME
    directory.mkdir(parents=True)
    zk = ZooKeeperProcess.start(directory / "zk")
    env = await start_env(directory, zk, random.Random(f"{seed}-{NAME}"), {})
    try:
        await create_topic(env)
        stop_producers, stop_consumers = threading.Event(), threading.Event()
        async with trio.open_nursery() as nursery:
            for work, args in (
                (_transactional, (random.Random(f"{seed}-t"), stop_producers)),
                (_plain, (random.Random(f"{seed}-p"), stop_producers)),
                (_consumer, ("assign", stop_consumers)),
                (_consumer, ("subscribe", stop_consumers)),
            ):
                nursery.start_soon(
                    lambda work=work, args=args: trio.to_thread.run_sync(work, env, *args, abandon_on_cancel=True)
                )
            await trio.sleep(3)
            what = await _nemesis(env)
            await trio.sleep(max(0.0, workload_s - 3))
            judged = await heal_and_judge(env)
            stop_producers.set()
            await trio.sleep(2)
            stop_consumers.set()
            nursery.cancel_scope.deadline = trio.current_time() + 90
        await trio.to_thread.run_sync(_final_read, env)
        report = check(env.history)
        report.liveness = judged
        return report, what
    finally:
        stop_env(env)
