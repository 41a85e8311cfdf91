"""The share group chaos scenario (`share-kill-leader-coordinator-member`, KIP-932, in
`make chaos` and `make test`), on a fresh 3-broker cluster (the chaos topic RF 3, min ISR 2;
`__share_group_state` and `__consumer_offsets` RF 3, min ISR 2):

- the workload: a confluent-kafka producer (acks=all, idempotent) sends unique values over the chaos topic's
  partitions while three share group members (`chaos/share_member.py`, each a process running a
  `ShareConsumer` in explicit mode) accept them, release one in ten and reject one in fifty,
  each writing its deliveries and acknowledgement answers to the history;
- the nemesis, a fault every few seconds, each recorded in the history: kill -9 the leader of a
  partition of the topic (restarted 3 s later), then the share coordinator of the group's state
  for a partition (the leader of its `__share_group_state` partition, restarted 3 s later), then
  a member (kill -9 of its process: its records come back when their locks run out), replaced;
- after the heal (liveness judged as for every scenario), a last member accepts whatever is left
  until nothing comes for a while, and `chaos.share_checker` judges the whole history.

Locks are short (`LOCK_MS`) and the delivery limit low (`LIMIT`) so redeliveries and archiving
happen within the run; `__share_group_state` is pruned every 2 s meanwhile.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from chaos.liveness import Liveness
from chaos.runner import PARTITIONS, TOPIC, Env, create_topic, heal_and_judge, start_env, stop_env
from chaos.share_checker import ShareReport, check
from client import Cluster, share_groups
from client.connection import Connection, ConnectionClosed
from coordinator.share.records import SharePartitionKey, partition_for
from local_cluster.brokers import LOG
from local_cluster.zookeeper import ZooKeeperProcess
from protocol.api_keys import ApiKey
from protocol.topic_names import SHARE_GROUP_STATE_TOPIC

NAME = "share-kill-leader-coordinator-member"
GROUP = "chaos-share"
LOCK_MS, LIMIT, STATE_PARTITIONS = 4000, 4, 3
EXTRA = {
    "offsets.topic.replication.factor": "3",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "share.coordinator.state.topic.prune.interval.ms": "2000",
    "share.coordinator.snapshot.update.records.per.snapshot": "5",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(LIMIT),
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "6000",
}


@dataclass
class ShareChaosReport:
    share: ShareReport
    liveness: Liveness | None = None
    faults: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.share.ok and (self.liveness is None or self.liveness.ok)

    def violations(self) -> dict:
        found = dict(self.share.violations())
        if self.liveness is not None and not self.liveness.ok:
            found["liveness"] = self.liveness.violations()
        return found


class _Members:
    """The member processes, each writing its history file."""

    def __init__(self, env: Env, directory: Path, seed: int) -> None:
        self.env, self.directory, self.seed = env, directory, seed
        self.running: dict[str, subprocess.Popen] = {}
        self.files: list[Path] = []

    def start(self, name: str, seconds: float, *extra: str) -> None:
        out = self.directory / f"{name}.jsonl"
        self.files.append(out)
        command = [sys.executable, "-m", "chaos.share_member", self.env.bootstrap, GROUP, TOPIC, name, str(out)]
        command += [str(self.seed + len(self.files)), "--seconds", str(seconds), *extra]
        log = open(self.directory / f"{name}.log", "w")  # noqa: SIM115 - the child's, closed with it
        self.running[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        self.running[name].kill()

    async def wait(self, timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            for process in self.running.values():
                while process.poll() is None:
                    await trio.sleep(0.2)
        for process in self.running.values():
            if process.poll() is None:
                process.kill()

    def history(self) -> list[dict]:
        events = []
        for path in self.files:
            if path.exists():
                for line in path.read_text().splitlines():
                    try:
                        events.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass  # the last line of a member killed mid-write
        return events


def _producer(env: Env, stop: threading.Event, rate: int) -> None:
    from confluent_kafka import Producer

    # idempotent: a retry after a leader kill must not write a value twice (the checker follows
    # each value as one record)
    config = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 30000}
    p = Producer({"bootstrap.servers": env.bootstrap, **config})
    outcomes: list[dict] = []

    def done(value: str):
        return lambda err, _msg: outcomes.append({"type": "produced", "value": value, "acked": err is None})

    i = 0
    while not stop.is_set():
        value = f"v{i}"
        p.produce(TOPIC, value.encode(), partition=i % PARTITIONS, on_delivery=done(value))
        p.poll(0)
        i += 1
        time.sleep(1 / rate)
    p.flush(60)
    env.history.extend(outcomes)


async def _earliest(bootstrap: str) -> None:
    """share.auto.offset.reset=earliest on the chaos group: it reads from the first record."""
    async with Cluster.open(bootstrap) as cluster:
        await share_groups.alter_group_configs(cluster, GROUP, {"share.auto.offset.reset": "earliest"})


async def _kill_and_restart(env: Env, broker_id: int, what: str) -> str:
    env.brokers[broker_id].kill()
    env.record(type="fault", what=f"killed broker {broker_id} ({what})")
    await trio.sleep(3)
    await env.restart(broker_id)
    return f"killed {what} {broker_id}"


async def _state_leader(env: Env, partition: int) -> int:
    """The broker coordinating the group's share state of the topic's `partition`."""
    md = await env.metadata()
    if md is None or not md.topics:
        return -1
    key = SharePartitionKey(GROUP, md.topics[0].topic_id, partition)
    state_partition = partition_for(key, STATE_PARTITIONS)
    for b in env.brokers.values():
        if not b.alive:
            continue
        try:
            async with Connection.open(b.host, b.port, connect_timeout_s=2) as conn:
                body = {"topics": [{"name": SHARE_GROUP_STATE_TOPIC}], "allow_auto_topic_creation": False}
                r = await conn.request(ApiKey.METADATA, body, timeout_s=3)
        except (ConnectionClosed, trio.TooSlowError):
            continue
        for p in r.topics[0].partitions if r.topics and r.topics[0].error_code == 0 else ():
            if p.partition_index == state_partition:
                return p.leader_id
    return -1


async def _nemesis(env: Env, members: _Members, member_s: float) -> str:
    done = []
    await trio.sleep(2)
    partition = env.rng.randrange(PARTITIONS)
    leader = await env.leader_of(partition)
    if leader > 0:
        done.append(await _kill_and_restart(env, leader, f"the leader of {TOPIC}-{partition}"))
    await trio.sleep(2)
    coordinator = await _state_leader(env, env.rng.randrange(PARTITIONS))
    if coordinator > 0:
        done.append(await _kill_and_restart(env, coordinator, "the share coordinator"))
    await trio.sleep(2)
    victim = env.rng.choice(sorted(members.running))
    members.kill(victim)
    env.record(type="fault", what=f"killed member {victim}")
    members.start("m4", member_s, "--release", "0.1", "--reject", "0.02")
    done.append(f"killed member {victim}")
    return "; ".join(done)


_BECAME_LEADER = re.compile(
    r"^(\S+ \S+),(\d{3}) INFO \[broker (\d+)\] \S+: became leader of \('([^']+)', (\d+)\) at epoch (\d+)"
)


def leader_changes(log_files: list[Path], topic: str, wall_minus_monotonic: float) -> list[dict]:
    """Every leader election of `topic`'s partitions after their first leader, from the brokers'
    `log_files` (local wall-clock times to the ms), as fault events on the history's
    monotonic clock. A partition's records acquired at its old leader are Available again at the
    new one (acquisition locks live only in the leader's memory, as in Kafka): an election the
    nemesis caused only indirectly (a broker's ZooKeeper session expiring under load, a bounced
    broker) is as much a fault as a kill."""
    found = []
    for log_file in log_files:
        for line in log_file.read_text(errors="replace").splitlines():
            m = _BECAME_LEADER.match(line)
            if m is None or m.group(4) != topic or int(m.group(6)) == 0:
                continue
            wall = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
            what = f"broker {m.group(3)} became leader of {topic}-{m.group(5)} at epoch {m.group(6)}"
            found.append({"type": "fault", "t": wall - wall_minus_monotonic, "what": what})
    return found


async def run_share_scenario(seed: int, root: Path, workload_s: float = 12.0) -> tuple[ShareChaosReport, str]:
    directory = root / NAME
    directory.mkdir(parents=True)
    wall_minus_monotonic = time.time() - time.monotonic()
    zk = ZooKeeperProcess.start(directory / "zk")
    env = await start_env(directory, zk, random.Random(f"{seed}-{NAME}"), EXTRA)
    try:
        await create_topic(env)
        await _earliest(env.bootstrap)
        members = _Members(env, directory, seed)
        member_s = workload_s + 14
        for name in ("m1", "m2", "m3"):
            members.start(name, member_s, "--release", "0.1", "--reject", "0.02")
        stop = threading.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, _producer, env, stop, 200)
            what = await _nemesis(env, members, member_s)
            await trio.sleep(max(0.0, workload_s - 12))
            liveness = await heal_and_judge(env)
            stop.set()
        await members.wait(member_s + 30)
        members.start("final", 90, "--idle", str(LOCK_MS / 1000 * 2 + 4))
        await members.wait(120)
        history = (
            env.history
            + members.history()
            + leader_changes([b.directory / LOG for b in env.brokers.values()], TOPIC, wall_minus_monotonic)
        )
        (directory / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in history))
        report = ShareChaosReport(check(history, LIMIT, LOCK_MS / 1000), liveness)
        report.faults = [e["what"] for e in history if e.get("type") == "fault"]
        return report, what
    finally:
        stop_env(env)


def summary(report: ShareChaosReport) -> str:
    s = report.share
    return (
        f"produced {s.produced}, delivered {s.delivered}, accepted {s.accepted}, rejected {s.rejected}, "
        f"archived {s.archived}, unconfirmed {s.unconfirmed}, violations {report.violations() or 'none'}"
    )
