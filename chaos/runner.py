"""Chaos scenarios: a real cluster (ZooKeeper + 3 broker processes) under a concurrent workload while a
nemesis injects faults; the history is then judged by `chaos.checker`.

Run all with `make chaos` (or `python -m chaos.runner [--seed N] [--only NAME]`); every random choice
derives from the printed seed, so `--seed` reproduces a run. Per scenario: fresh cluster, topic
`chaos` (3 partitions, RF 3, min.insync.replicas=2), two idempotent producers (acks=all, retries, one
request in flight) writing unique values, a consumer per partition and a leader observer, all
recording into `<dir>/<scenario>/history.jsonl`; then the nemesis; then heal (every broker and
ZooKeeper running), judge liveness from that moment (`chaos.liveness`: leaders, replication,
admin requests answered, no broker exited by itself; the "heal s" column), wait for a full ISR,
stop cleanly, read every replica's log files and judge safety. The group
scenarios (`GROUP_SCENARIOS`) also run a consumer group of two members that commit as they read
(`chaos/groups.py`); after the heal it drains to the log end before the group is judged.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import trio

from chaos import groups, liveness
from chaos.checker import Report, check
from client import Cluster, ConnectionClosed, KafkaError
from client.connection import Connection
from client.producer import Producer
from client.reads import LATEST, list_offset
from local_cluster.brokers import BrokerProcess, start_all
from local_cluster.zookeeper import ZooKeeperProcess
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security.config import ClientSecurity

TOPIC, PARTITIONS = "chaos", 3
TXN_SCENARIO = "txn-kill-coordinator-and-leader"  # chaos/transactions.py (its own workload and checker)
EOS_SCENARIO = "eos-kill-both-coordinators"  # chaos/eos.py (examples/exactly_once.py as the workload)
ANALYSIS_SCENARIO = "analysis-mixed-workload"  # chaos/analysis.py (its own workload and anomaly checker)


@dataclass
class Env:
    directory: Path
    zk: ZooKeeperProcess
    brokers: dict[int, BrokerProcess]
    rng: random.Random
    history: list
    last_committed: dict = field(default_factory=dict)  # the group's, as its observer last read them
    member_scopes: dict = field(default_factory=dict)  # group member name -> its task's cancel scope
    member_killed_at: float | None = None  # when a nemesis killed a group member (trio's clock)
    group_rebalance_s: float | None = None  # from that kill until the group was Stable without it
    mixed_group: bool | None = None  # a mixed scenario's group held a classic and a consumer member
    security: ClientSecurity | None = None  # the clients' settings on a secured cluster
    topic: str = TOPIC  # the workload's topic (the docker target uses one per scenario)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def record(self, **event) -> None:
        event["t"] = time.monotonic()
        self.history.append(event)

    async def metadata(self):
        for b in self.brokers.values():
            if not b.alive:
                continue
            try:
                async with Connection.open(b.host, b.port, connect_timeout_s=2, security=self.security) as conn:
                    return await conn.request(
                        ApiKey.METADATA,
                        {"topics": [{"name": self.topic}], "allow_auto_topic_creation": False},
                        timeout_s=3,
                    )
            except (ConnectionClosed, trio.TooSlowError):
                continue
        return None

    async def leader_of(self, partition: int) -> int:
        md = await self.metadata()
        return md.topics[0].partitions[partition].leader_id if md and md.topics and md.topics[0].partitions else -1

    async def controller(self) -> int:
        md = await self.metadata()
        return md.controller_id if md else -1

    async def restart(self, broker_id: int) -> None:
        await trio.to_thread.run_sync(self.brokers[broker_id].start)


# ---- the workload --------------------------------------------------------------------------------


async def producer_task(env: Env, name: str, stop: trio.Event, outstanding: int = 200) -> None:
    """Unique values round-robin over the partitions, up to `outstanding` records awaiting their
    acknowledgement at once (so a stalled partition does not stop the others); within a partition
    the producer keeps one request in flight, so send order is log order."""
    slots = trio.Semaphore(outstanding)
    async with Cluster.open(env.bootstrap, security=env.security, retries=60, backoff_ms=100) as cluster:
        async with Producer.open(cluster, max_in_flight=1, linger_ms=1, delivery_timeout_ms=60000) as producer:
            async with trio.open_nursery() as settling:
                seq = 0
                while not stop.is_set():
                    await slots.acquire()
                    value = f"{name}-{seq}".encode()
                    partition = seq % PARTITIONS
                    env.record(op="send", producer=name, partition=partition, value=value)
                    delivery = await producer.send(env.topic, value, partition=partition)

                    async def settle(delivery=delivery, value=value, partition=partition):
                        try:
                            meta = await delivery.wait()
                            env.record(op="ack", producer=name, partition=partition, value=value, offset=meta.offset)
                        except KafkaError as e:
                            env.record(op="fail", producer=name, partition=partition, value=value, error=str(e))
                        finally:
                            slots.release()

                    settling.start_soon(settle)
                    seq += 1


async def consumer_task(env: Env, partition: int, stop: trio.Event) -> None:
    position = 0
    async with Cluster.open(env.bootstrap, security=env.security, retries=0) as cluster:
        while not stop.is_set():
            try:
                conn = await cluster.leader_connection(env.topic, partition, refresh=True)
                r = await conn.request(
                    ApiKey.FETCH,
                    {
                        "replica_id": -1,
                        "max_wait_ms": 200,
                        "min_bytes": 1,
                        "max_bytes": 1 << 20,
                        "topics": [
                            {
                                "topic": env.topic,
                                "partitions": [
                                    {"partition": partition, "fetch_offset": position, "partition_max_bytes": 1 << 20}
                                ],
                            }
                        ],
                    },
                    timeout_s=5,
                )
            except (KafkaError, ConnectionClosed, trio.TooSlowError):
                await trio.sleep(0.1)
                continue
            p = r.responses[0].partitions[0]
            if p.error_code != ErrorCode.NONE:
                await trio.sleep(0.1)
                continue
            env.record(op="hw", consumer=f"c{partition}", partition=partition, hw=p.high_watermark)
            data = p.records or b""
            for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                for record in rb.decode_records(data, pos, header):
                    if record.offset >= position:
                        env.record(
                            op="read",
                            consumer=f"c{partition}",
                            partition=partition,
                            offset=record.offset,
                            value=record.value,
                        )
                position = max(position, header.next_offset)


async def observer_task(env: Env, stop: trio.Event) -> None:
    while not stop.is_set():
        md = await env.metadata()
        for p in range(PARTITIONS):
            leader = -1
            if md and md.topics and md.topics[0].error_code == 0 and len(md.topics[0].partitions) > p:
                part = md.topics[0].partitions[p]
                leader = part.leader_id if part.error_code == 0 else -1
            env.record(op="leader", partition=p, leader=leader)
        await trio.sleep(0.1)


def start_workload(nursery: trio.Nursery, env: Env, stop: trio.Event) -> None:
    """Two producers, a consumer per partition and the leader observer, until `stop`."""
    for producer in ("p1", "p2"):
        nursery.start_soon(producer_task, env, producer, stop)
    for p in range(PARTITIONS):
        nursery.start_soon(consumer_task, env, p, stop)
    nursery.start_soon(observer_task, env, stop)


# ---- the nemeses --------------------------------------------------------------------------------


async def kill_leader(env: Env) -> str:
    done = []
    for _ in range(2):
        partition = env.rng.randrange(PARTITIONS)
        victim = await env.leader_of(partition)
        if victim < 0:
            continue
        env.brokers[victim].kill()
        done.append(f"killed leader {victim} of partition {partition}")
        await trio.sleep(env.rng.uniform(2, 4))
        await env.restart(victim)
        await trio.sleep(2)
    return "; ".join(done)


async def kill_controller(env: Env) -> str:
    victim = await env.controller()
    env.brokers[victim].kill()
    await trio.sleep(env.rng.uniform(3, 5))
    await env.restart(victim)
    return f"killed controller {victim}"


async def kill_random(env: Env) -> str:
    victims = []
    for _ in range(3):
        victim = env.rng.choice(list(env.brokers))
        env.brokers[victim].kill()
        victims.append(victim)
        await trio.sleep(env.rng.uniform(1, 3))
        await env.restart(victim)
        await trio.sleep(1)
    return f"killed brokers {victims} in turn"


async def pause(env: Env) -> str:
    victim = env.rng.choice(list(env.brokers))
    env.brokers[victim].process.send_signal(signal.SIGSTOP)
    seconds = env.rng.uniform(4, 6)
    await trio.sleep(seconds)
    env.brokers[victim].process.send_signal(signal.SIGCONT)
    return f"paused broker {victim} for {seconds:.1f} s"


async def rolling_restart(env: Env) -> str:
    for broker_id in env.rng.sample(list(env.brokers), len(env.brokers)):
        await trio.to_thread.run_sync(env.brokers[broker_id].stop)
        await env.restart(broker_id)
        await trio.sleep(2)
    return "SIGTERM and restart of every broker in turn"


async def restart_zookeeper(env: Env) -> str:
    port = env.zk.port
    env.zk.kill()
    await trio.sleep(env.rng.uniform(2, 4))
    env.zk = await trio.to_thread.run_sync(lambda: ZooKeeperProcess.start(env.directory / "zk", port=port))
    return "killed ZooKeeper and started it again"


async def kill_two(env: Env) -> str:
    victims = env.rng.sample(list(env.brokers), 2)
    for v in victims:
        env.brokers[v].kill()
    await trio.sleep(env.rng.uniform(5, 7))
    for v in victims:
        await env.restart(v)
    return f"killed brokers {victims} together, restarted them later"


SESSION_TIMEOUT_S = 4.0  # the chaos brokers' zookeeper.session.timeout.ms


async def expire_session_twice(env: Env) -> str:
    """A broker paused for more than twice its ZooKeeper session timeout, twice in a row: its
    session expires each time (its partitions move away, it must re-register and rejoin by itself)."""
    victim = env.rng.choice(list(env.brokers))
    for _ in range(2):
        env.brokers[victim].process.send_signal(signal.SIGSTOP)
        await trio.sleep(2 * SESSION_TIMEOUT_S + 1)
        env.brokers[victim].process.send_signal(signal.SIGCONT)
        await trio.sleep(1)  # the second pause strikes while it is re-registering
    return f"paused broker {victim} for {2 * SESSION_TIMEOUT_S + 1:.0f} s, twice in a row"


CPU_HOGS = 1


def _hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


async def cpu_hog(env: Env) -> str:
    """`CPU_HOGS` processes that each keep a core busy beside the cluster while a leader is killed
    and restarted: everything is slower, nothing may stay broken. (One: on the 2-core machines the
    suite runs on, the other pytest process runs timing-sensitive tests meanwhile.)"""
    hogs = [_hog() for _ in range(CPU_HOGS)]
    try:
        partition = env.rng.randrange(PARTITIONS)
        victim = await env.leader_of(partition)
        if victim >= 0:
            env.brokers[victim].kill()
            await trio.sleep(env.rng.uniform(3, 5))
            await env.restart(victim)
        await trio.sleep(3)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return f"{CPU_HOGS} CPU hog(s); killed and restarted leader {victim} of partition {partition} beside"


IPTABLES_TAG = "minikafka-chaos"


def iptables_works() -> bool:
    try:
        return subprocess.run(["iptables", "-L", "-n"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _iptables(action: str, port: int) -> None:
    subprocess.run(
        [
            "iptables",
            action,
            "INPUT",
            "-p",
            "tcp",
            "--dport",
            str(port),
            "-m",
            "comment",
            "--comment",
            IPTABLES_TAG,
            "-j",
            "DROP",
        ],
        check=True,
        capture_output=True,
        timeout=10,
    )


async def partition(env: Env) -> str:
    """Drop every packet to one broker's listener (iptables on loopback): clients and followers
    cannot reach it while its ZooKeeper session stays up (Kafka's classic half-partition)."""
    victim = await env.leader_of(0)
    port = env.brokers[victim].port
    _iptables("-A", port)
    try:
        await trio.sleep(env.rng.uniform(6, 8))
    finally:
        _iptables("-D", port)
    return f"partitioned broker {victim} (inbound to :{port} dropped)"


async def unclean(env: Env) -> str:
    """Unclean election enabled: pause a follower out of the ISR, kill the others; the follower
    becomes leader without the data it missed. The checker must report the loss."""
    partition = 0
    leader = await env.leader_of(partition)
    followers = [b for b in env.brokers if b != leader]
    lagging = env.rng.choice(followers)
    env.brokers[lagging].process.send_signal(signal.SIGSTOP)
    await trio.sleep(5)  # > replica.lag.time.max.ms: it leaves the ISR while the others take writes
    for b in env.brokers:
        if b != lagging:
            env.brokers[b].kill()
    env.brokers[lagging].process.send_signal(signal.SIGCONT)
    await trio.sleep(6)  # the controller (on the paused broker, or elected there) picks it: unclean
    for b in env.brokers:
        if b != lagging:
            await env.restart(b)
    return f"paused {lagging} out of the ISR, killed the others: unclean election"


#: the broker whose log dir is a small tmpfs in the disk-full scenario, and its size
DISK_FULL_BROKER, DISK_FULL_SIZE = 1, "64m"


def tmpfs_works(directory: Path) -> bool:
    """Whether a tmpfs can be mounted here (root, and mount allowed): what disk-full needs."""
    probe = directory / "tmpfs-probe"
    probe.mkdir(parents=True, exist_ok=True)
    try:
        if (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True, timeout=10
            ).returncode
            != 0
        ):
            return False
        subprocess.run(["umount", "-l", str(probe)], capture_output=True, timeout=10)
        return True
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        probe.rmdir()


def _fill(path: Path) -> int:
    """Write `path` until the file system is full; returns the bytes written."""
    written = 0
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError:
                return written


async def disk_full(env: Env) -> str:
    """Fill the log dir of one broker (a small tmpfs) while it leads: its appends fail, it takes
    the dir offline, and the controller moves its leaderships; after the disk is freed and the
    broker restarted, it catches up. Nothing acknowledged may be lost."""
    victim = env.brokers[DISK_FULL_BROKER]
    filler = victim.directory / "logs" / "filler"
    written = await trio.to_thread.run_sync(_fill, filler)
    await trio.sleep(env.rng.uniform(5, 7))
    filler.unlink()
    victim.kill()
    await env.restart(DISK_FULL_BROKER)
    return f"filled broker {DISK_FULL_BROKER}'s log dir ({written >> 20} MiB of filler), freed it, restarted the broker"


SCENARIOS = {
    "kill-leader": (kill_leader, {}),
    "kill-controller": (kill_controller, {}),
    "kill-random-broker": (kill_random, {}),
    "pause-broker": (pause, {}),
    "rolling-restart": (rolling_restart, {}),
    "restart-zookeeper": (restart_zookeeper, {}),
    "kill-two-brokers": (kill_two, {}),
    "partition-broker": (partition, {}),
    "unclean-election": (unclean, {"unclean.leader.election.enable": "true"}),
    "disk-full": (disk_full, {}),
    "group-kill-coordinator": (groups.kill_coordinator, {}),
    "group-kill-member-and-coordinator": (groups.kill_member_and_coordinator, {}),
    # the same with KIP-848's consumer protocol, and with a group mid-migration (one member of each)
    "group-kill-coordinator-consumer-protocol": (groups.kill_coordinator, groups.CONSUMER_PROTOCOL_KEYS),
    "group-kill-member-and-coordinator-consumer-protocol": (
        groups.kill_member_and_coordinator,
        groups.CONSUMER_PROTOCOL_KEYS,
    ),
    "group-kill-coordinator-mixed-protocols": (groups.kill_coordinator, groups.CONSUMER_PROTOCOL_KEYS),
    "zk-session-expired-twice": (expire_session_twice, {}),
    "cpu-hog": (cpu_hog, {}),
}
#: scenarios that also run a consumer group (and judge it: chaos/checker.py properties 5-7)
GROUP_SCENARIOS = {name for name in SCENARIOS if name.startswith("group-")}
#: the group protocol of members g1 and g2 per group scenario (classic unless named)
GROUP_PROTOCOLS = {
    "group-kill-coordinator-consumer-protocol": ("consumer", "consumer"),
    "group-kill-member-and-coordinator-consumer-protocol": ("consumer", "consumer"),
    "group-kill-coordinator-mixed-protocols": ("classic", "consumer"),
}
#: scenarios on a SASL_SSL cluster (clients and inter-broker traffic): the same workload and checks
SECURED_SCENARIOS = {"kill-leader-sasl-ssl": "kill-leader"}
for _secured, _plain in SECURED_SCENARIOS.items():
    SCENARIOS[_secured] = SCENARIOS[_plain]


def secured_cluster(directory: Path) -> tuple[dict, ClientSecurity]:
    """Broker keys of a SASL_SSL-only cluster (a new CA under `directory`) and its clients' settings."""
    from local_cluster.pki import make_pki
    from security.config import client_security

    pki = make_pki(directory / "pki")
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="chaos" password="chaos-secret" user_chaos="chaos-secret";'
    )
    brokers = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.location": str(pki.ca_file),
    }
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "chaos",
        "sasl.password": "chaos-secret",
        "ssl.truststore.location": str(pki.ca_file),
    }
    return brokers, client_security(client)


# ---- running and judging ----------------------------------------------------------------------------


def replica_records(broker: BrokerProcess, partition: int) -> list[tuple[int, bytes]]:
    out = []
    for segment in sorted((broker.directory / "logs" / f"{TOPIC}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        for pos, header in rb.iter_batches(data):
            out += [(r.offset, r.value) for r in rb.decode_records(data, pos, header)]
    return out


async def heal(env: Env, wait_isr: bool = True) -> float:
    """Every process running again (ZooKeeper, every broker: resumed or restarted), then (with
    `wait_isr`) until the workload topic's ISR is full (at most 60 s). Returns when the processes
    were all running (trio's clock), the moment liveness is measured from."""
    if env.zk.process.poll() is not None:
        env.zk = await trio.to_thread.run_sync(lambda: ZooKeeperProcess.start(env.directory / "zk", port=env.zk.port))
    for broker_id, broker in env.brokers.items():
        if broker.alive:
            broker.process.send_signal(signal.SIGCONT)
        else:
            await env.restart(broker_id)
    healed_at = trio.current_time()
    if wait_isr:
        await wait_full_isr(env, 60)
    return healed_at


async def heal_and_judge(env: Env) -> liveness.Liveness:
    """Heal (`heal`), judge liveness from that moment (`chaos.liveness.measure`; brokers that
    exited by themselves are noted before the heal restarts them), then wait for a full ISR."""
    exited = liveness.exited_by_themselves(env.brokers)
    healed_at = await heal(env, wait_isr=False)
    judged = await liveness.measure(env, healed_at)
    judged.exited = exited + [e for e in judged.exited if e not in exited]
    await wait_full_isr(env, 60)
    return judged


def stop_env(env: Env) -> None:
    """Kill every broker and ZooKeeper (the end of a scenario, whatever happened)."""
    for b in env.brokers.values():
        b.kill()
    env.zk.kill()


async def wait_full_isr(env: Env, timeout_s: float) -> None:
    """Until every partition of the workload's topic has a leader and all 3 replicas in its ISR
    (at most `timeout_s`: the checker judges what it finds), then 2 s of quiescence so the
    followers learn the final HW."""
    with trio.move_on_after(timeout_s):
        while True:
            md = await env.metadata()
            if md and md.topics and all(len(p.isr_nodes) == 3 and p.leader_id >= 0 for p in md.topics[0].partitions):
                break
            await trio.sleep(0.2)
    await trio.sleep(2)


async def drain_group(env: Env, timeout_s: float = 60) -> None:
    """After the producers stop: wait until the group has committed every partition's log end."""
    await trio.sleep(2)  # the last acknowledgements settle
    with trio.move_on_after(timeout_s):
        async with Cluster.open(env.bootstrap, security=env.security, retries=30) as cluster:
            ends = {p: await list_offset(cluster, TOPIC, p, LATEST) for p in range(PARTITIONS)}
        while any(env.last_committed.get(p, -1) < end for p, end in ends.items()):
            await trio.sleep(0.3)


async def start_env(
    directory: Path, zk: ZooKeeperProcess, rng: random.Random, extra: dict, security: ClientSecurity | None = None
) -> Env:
    """Three brokers on `zk` (Kafka keys in `extra` override the chaos defaults), ready."""
    brokers = {}
    for i in (1, 2, 3):
        brokers[i] = BrokerProcess.create(
            i,
            directory / f"b{i}",
            zk.connect,
            replica_lag_time_max_ms="2000",
            zookeeper_session_timeout_ms=str(int(SESSION_TIMEOUT_S * 1000)),
            offsets_topic_num_partitions=str(groups.OFFSETS_PARTITIONS),
            group_initial_rebalance_delay_ms="0",
            **extra,
        )
    start_all(list(brokers.values()))
    env = Env(directory, zk, brokers, rng, [], security=security)
    with trio.fail_after(30):  # every registration processed by the controller
        while not ((md := await env.metadata()) and len(md.brokers) == 3 and md.controller_id >= 0):
            await trio.sleep(0.1)
    return env


async def create_topic(env: Env) -> None:
    """The chaos topic (PARTITIONS partitions, RF 3, min.insync.replicas=2), its ISR full."""
    async with Cluster.open(env.bootstrap, security=env.security, retries=30) as cluster:

        async def create(refresh):
            md = await cluster.refresh_metadata([])
            conn = await cluster.broker_connection(md.controller_id)
            r = await conn.request(
                ApiKey.CREATE_TOPICS,
                {
                    "topics": [
                        {
                            "name": env.topic,
                            "num_partitions": PARTITIONS,
                            "replication_factor": 3,
                            "configs": [{"name": "min.insync.replicas", "value": "2"}],
                        }
                    ],
                    "timeout_ms": 10000,
                },
            )
            if r.topics[0].error_code != 0:
                raise KafkaError(r.topics[0].error_code, "CreateTopics")

        await cluster.retry(create, "CreateTopics")
    with trio.fail_after(30):
        while not (
            (md := await env.metadata())
            and md.topics
            and md.topics[0].error_code == 0
            and all(len(p.isr_nodes) == 3 for p in md.topics[0].partitions)
        ):
            await trio.sleep(0.2)


async def run_scenario(name: str, seed: int, root: Path, workload_s: float = 12.0) -> tuple[Report, str]:
    nemesis, extra = SCENARIOS[name]
    directory = root / name
    directory.mkdir(parents=True)
    zk = ZooKeeperProcess.start(directory / "zk")
    mounted = None
    if name == "disk-full":  # broker 1's log dir is a small tmpfs the nemesis fills
        mounted = directory / f"b{DISK_FULL_BROKER}" / "logs"
        mounted.mkdir(parents=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_FULL_SIZE}", "tmpfs", str(mounted)], check=True)
    security = None
    if name in SECURED_SCENARIOS:
        secured, security = secured_cluster(directory)
        extra = {**extra, **secured}
    env = await start_env(directory, zk, random.Random(f"{seed}-{name}"), extra, security)
    try:
        await create_topic(env)
        stop, group_stop = trio.Event(), trio.Event()
        async with trio.open_nursery() as nursery:
            start_workload(nursery, env, stop)
            if name in GROUP_SCENARIOS:
                for member, protocol in zip(("g1", "g2"), GROUP_PROTOCOLS.get(name, ("classic", "classic"))):
                    nursery.start_soon(groups.group_consumer_task, env, member, TOPIC, group_stop, protocol)
                    await trio.sleep(0.5)  # mixed: the classic member forms the group, the other upgrades it
                nursery.start_soon(groups.committed_observer_task, env, TOPIC, group_stop)
            await trio.sleep(2)
            if GROUP_PROTOCOLS.get(name) == ("classic", "consumer"):
                env.mixed_group = await groups.mixed_group_formed(env)
            what = await nemesis(env)
            await trio.sleep(max(0.0, workload_s - 2))
            judged = await heal_and_judge(env)
            if env.member_killed_at is not None:  # measured by the nemesis, from the kill on
                judged.group_measured, judged.group_s = True, env.group_rebalance_s
            stop.set()
            if name in GROUP_SCENARIOS:
                await drain_group(env)
            group_stop.set()
            # producers finish the record they are waiting for; an unsettled one stays "sent"
            nursery.cancel_scope.deadline = trio.current_time() + 60
        md = await env.metadata()
        leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
        isr = {p.partition_index: list(p.isr_nodes) for p in md.topics[0].partitions}
        async with trio.open_nursery() as stopping:  # each flushes and checkpoints; all at once
            for b in env.brokers.values():
                stopping.start_soon(trio.to_thread.run_sync, b.stop)
        hws = {}
        for p in range(PARTITIONS):
            text = (env.brokers[leaders[p]].directory / "logs" / "replication-offset-checkpoint").read_text()
            hws[p] = next(int(line.split()[2]) for line in text.splitlines()[2:] if line.split()[:2] == [TOPIC, str(p)])
        replicas = {p: {b: replica_records(broker, p) for b, broker in env.brokers.items()} for p in range(PARTITIONS)}
        (directory / "history.jsonl").write_text(
            "".join(
                json.dumps({k: (v.decode() if isinstance(v, bytes) else v) for k, v in e.items()}) + "\n"
                for e in env.history
            )
        )
        report = check(env.history, replicas, leaders, isr, hws, in_order=True)
        report.liveness = judged
        if env.mixed_group is not None:
            what += f"; the group held a classic and a consumer member: {'yes' if env.mixed_group else 'NO'}"
            report.mixed_group = env.mixed_group
        return report, what
    finally:
        stop_env(env)
        if mounted is not None:
            subprocess.run(["umount", "-l", str(mounted)], capture_output=True)


def format_row(name: str, report: Report, what: str) -> str:
    live = report.liveness
    heal = "-" if live is None or live.heal_s is None else f"{live.heal_s:.1f}"
    verdict = "ok" if report.ok else "VIOLATIONS " + str(report.violations())
    if live is not None:
        verdict += ", live" if live.ok else ", NOT LIVE " + str(live.violations())
        if live.group_measured:
            group = "-" if live.group_s is None else f"{live.group_s:.1f}"
            what += f"; the group was Stable without its dead member {group} s after the kill"
    return (
        f"{name:20} {report.attempted:>7} {report.acked:>6} {report.failed:>6} {len(report.lost):>5} "
        f"{len(report.duplicated):>5} {report.max_leaderless_s:>10.1f} {heal:>6}  {verdict}  [{what}]"
    )


def special_row(name: str, counts: str, violations, not_live: list[str], what: str) -> int:
    """Print the row of a scenario with its own workload and checker; returns its failures (0-2)."""
    verdict = "ok" if not violations else f"VIOLATIONS {violations}"
    verdict += ", live" if not not_live else f", NOT LIVE {not_live}"
    print(f"{name:20} {counts}  {verdict}  [{what}]", flush=True)
    return (1 if violations else 0) + (1 if not_live else 0)
