"""The exactly-once chaos scenario (`eos-kill-both-coordinators`, in `make chaos` and the suite):
`examples/exactly_once.py` (a confluent-kafka consume-transform-produce job counting flights per
carrier, one transaction per batch) on a fresh 3-broker cluster while the one broker that is both
its transaction coordinator and its group coordinator is killed -9 and stays down `DOWN_S`.

Safety: a read_committed reader sees for every carrier exactly 1, 2, ..., n (`job.verify`).
Liveness: the job counts every flight within `BOUND_S` of its start (it used to hang for 10 minutes).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from chaos.runner import EOS_SCENARIO
from local_cluster.brokers import LOG, BrokerProcess, start_all
from local_cluster.zookeeper import ZooKeeperProcess
from protocol.api_keys import ApiKey

NAME = EOS_SCENARIO
ROWS = 2000
DOWN_S = 50  # the coordinators' broker stays down this long
BOUND_S = 120  # the job must count every flight within this long
SETTINGS = {
    "offsets_topic_replication_factor": "3",
    "offsets_topic_num_partitions": "3",
    "transaction_state_log_num_partitions": "3",
    "group_initial_rebalance_delay_ms": "0",
}


@dataclass
class EosReport:
    took_s: float = 0.0
    problems: list[str] = field(default_factory=list)  # what exactly-once forbids, as verify finds it
    restarts: list[str] = field(default_factory=list)  # the job's restarts after fatal producer errors
    #: when a check fails: the brokers' log lines on transactions, leaders and ISRs (the evidence
    #: a CI log keeps once the cluster's directory is gone)
    evidence: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def live(self) -> bool:
        return self.took_s < BOUND_S


def _coordinator(broker: BrokerProcess, key: str, key_type: int) -> int:
    """FindCoordinator v2 (0: group, 1: transactional id) -> the coordinator's id, or -1."""
    from client.connection import Connection

    async def ask():
        async with Connection.open(broker.host, broker.port) as conn:
            r = await conn.request(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, version=2)
            return r.node_id if r.error_code == 0 else -1

    return trio.run(ask)


def _wait(predicate, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _ends(bootstrap: str, topic: str) -> list[str]:
    """Per partition of `topic`: its HW and last stable offset, as ListOffsets (through
    librdkafka's watermark query) answers each isolation level; an LSO that stays below the HW
    after the job is a transaction left open (what a failed check needs to tell apart from a
    short read)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    ends: dict[str, list[int]] = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-ends", "isolation.level": isolation})
        try:
            partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
            for p in sorted(partitions):
                high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                ends.setdefault(f"{topic}-{p}", []).append(high)
        except KafkaException as e:  # the checks' own findings must not be lost to this one
            return [f"{topic}: HW and LSO not read ({isolation}): {e}"]
        finally:
            consumer.close()
    return [f"{tp}: HW {hw}, LSO {lso}" for tp, (hw, lso) in ends.items()]


#: what a failed run's broker logs are searched for (`evidence`)
_EVIDENCE = ("WARNING", "ERROR", "marker", "aborting", "left in", "became leader", "ISR", "verif", "fenc")


def _evidence(brokers: dict[int, BrokerProcess], lines_per_broker: int = 60) -> list[str]:
    """The last `lines_per_broker` matching lines of each broker's log; a message repeated (a
    reconnect loop every 100 ms) is kept once, its first time."""
    out = []
    for broker in brokers.values():
        path = broker.directory / LOG
        if not path.exists():
            continue
        seen: set[str] = set()
        lines = []
        for line in path.read_text(errors="replace").splitlines():
            message = line[24:]  # after the timestamp
            if any(w in line for w in _EVIDENCE) and message not in seen:
                seen.add(message)
                lines.append(line[:240])
        out += lines[-lines_per_broker:]
    return out


def run_eos_scenario(seed: int, root: Path) -> tuple[EosReport, str]:
    """Blocking (the job is a confluent-kafka application): returns the report and what was done."""
    from examples import exactly_once as job

    directory = root / NAME
    directory.mkdir(parents=True)
    zk = ZooKeeperProcess.start(directory / "zk")
    brokers = {i: BrokerProcess.create(i, directory / f"b{i}", zk.connect, **SETTINGS) for i in (1, 2, 3)}
    start_all(list(brokers.values()))
    saved_id = job.TRANSACTIONAL_ID
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        job.create_topics(bootstrap)
        _wait(lambda: _coordinator(brokers[1], job.GROUP, 0) in brokers, "the group coordinator")
        _wait(lambda: _coordinator(brokers[1], "probe", 1) in brokers, "the transaction coordinators")
        both = _coordinator(brokers[1], job.GROUP, 0)
        rng = random.Random(f"{seed}-{NAME}")
        candidates = [f"counts-{rng.randrange(1 << 30)}" for _ in range(200)]
        job.TRANSACTIONAL_ID = next(t for t in candidates if _coordinator(brokers[1], t, 1) == both)
        per_carrier = job.load_flights(bootstrap, ROWS)
        killer: list[threading.Thread] = []
        restart_failed: list[str] = []

        def kill_then_restart() -> None:
            brokers[both].kill()
            time.sleep(DOWN_S)
            try:
                brokers[both].start()
            except Exception as e:  # reported below, on the scenario's thread
                restart_failed.append(f"restarting broker {both} failed: {e}")

        def chaos(processed: int) -> None:
            if processed > ROWS * 0.3 and not killer:
                killer.append(threading.Thread(target=kill_then_restart))
                killer[0].start()

        report = EosReport()
        started = time.monotonic()
        counts = job.run_job(
            bootstrap, ROWS, batch=50, on_progress=chaos, restarts=report.restarts, timeout_s=BOUND_S + 60
        )
        report.took_s = time.monotonic() - started
        if counts != per_carrier:
            report.problems.append("the job's own counts differ from the input")
        if not killer:
            raise RuntimeError("the job finished before the chaos hook killed a broker")
        # the restart's own readiness wait ends first: the brokers are killed in `finally` only
        # after it, never while it still waits (once seen as "broker 3 exited with -9")
        killer[0].join(DOWN_S + 60)
        if killer[0].is_alive():
            raise TimeoutError(f"broker {both} not back within {DOWN_S + 60} s")
        report.problems += restart_failed
        report.problems += job.verify(bootstrap, per_carrier)
        if report.problems:
            report.problems += _ends(bootstrap, job.SINK)
        if not (report.ok and report.live):
            report.evidence = _evidence(brokers)
        what = f"killed broker {both} (both coordinators of {job.TRANSACTIONAL_ID}), down {DOWN_S} s"
        return report, what
    finally:
        job.TRANSACTIONAL_ID = saved_id
        for b in brokers.values():
            b.kill()
        zk.kill()
