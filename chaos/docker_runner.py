"""Chaos on real hosts: the chaos workload and history checker (`chaos.runner`, `chaos.checker`)
against the docker-compose cluster, with nemeses that act on containers.

Run with `make chaos-docker` (or `python -m chaos.docker_runner [--seed N] [--only NAME]`). One compose
project for the run (images built or reused first, EXTERNAL listeners on free host ports); each
scenario gets its own topic (3 partitions, RF 3, min.insync.replicas=2), two idempotent acks=all
producers, a consumer per partition and a leader observer; then its nemesis; then the heal (every
container running, unpaused, connected, ISR full). The replicas' logs are read inside the containers
(`docker exec`) once nothing writes, each partition's high watermark from its leader (ListOffsets),
and the history is judged as in `make chaos`. The broker settings are docker-compose.yml's own.

Nemeses: `docker kill` of a leader (then `docker start`), `docker pause`, `docker stop` (SIGTERM:
controlled shutdown) of the controller, `docker network disconnect` of a leader, one broker cut
off from ZooKeeper only (iptables in the container's network namespace, entered with nsenter), and
ZooKeeper nodes killed: the ensemble's leader (a quorum of two remains), then two of the three (no
quorum, as Kafka the brokers keep serving on their current leaders).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import trio

from chaos import liveness
from chaos.checker import Report, check
from chaos.runner import (
    PARTITIONS,
    Env,
    create_topic,
    format_row,
    start_workload,
    wait_full_isr,
)
from client import Cluster
from client.reads import LATEST, list_offset
from local_cluster.compose import (
    BROKERS,
    ZOOKEEPERS,
    ComposeCluster,
    DockerError,
    build_images,
    docker_unavailable,
)
from local_cluster.ports import free_port
from protocol import record_batch as rb


@dataclass
class Container:
    """A broker container as the workload sees it: its EXTERNAL listener on the host."""

    service: str
    port: int
    host: str = "127.0.0.1"
    alive: bool = True  # a paused or cut-off container just times out: the workload tries every one

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class Faults:
    """What the nemesis did and the heal must undo."""

    paused: set[str]  # frozen with `docker pause`
    disconnected: set[str]
    zk_blocked: dict[str, list[list[str]]]  # service -> the iptables rules added in its namespace
    stopped: set[str] = field(default_factory=set)  # ZooKeeper nodes killed
    sigstopped: set[str] = field(default_factory=set)  # paused with SIGSTOP where the freezer failed


async def _docker(cluster: ComposeCluster, verb: str, service: str, *args: str) -> None:
    await trio.to_thread.run_sync(lambda: cluster.docker(verb, service, *args))


async def kill_leader(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    partition = env.rng.randrange(PARTITIONS)
    victim = await env.leader_of(partition)
    await _docker(cluster, "kill", f"broker{victim}")
    await trio.sleep(env.rng.uniform(3, 5))
    await _docker(cluster, "start", f"broker{victim}")
    return f"docker kill of broker{victim} (leader of partition {partition}), then docker start"


FREEZE_ATTEMPTS = 3


async def _freeze(cluster: ComposeCluster, faults: Faults, service: str) -> str:
    """Stop every thread of the broker in `service`; how it was done, for the report.

    `docker pause` (the cgroup freezer) first. runc gives up with "unable to freeze" when a task does
    not reach the frozen state in time (seen in CI under load; runc thaws the cgroup again), so after
    FREEZE_ATTEMPTS such failures the broker gets SIGSTOP instead: it is the container's only
    process (the image's ENTRYPOINT), and SIGSTOP sent from the host reaches a namespace's init.
    Other Docker errors propagate."""
    for attempt in range(FREEZE_ATTEMPTS):
        try:
            await _docker(cluster, "pause", service)
        except DockerError as e:
            if "unable to freeze" not in str(e):
                raise
            await trio.sleep(0.2 * (attempt + 1))
            continue
        faults.paused.add(service)
        return "docker pause"
    await _docker(cluster, "kill", service, "--signal", "STOP")
    faults.sigstopped.add(service)
    return f"SIGSTOP (the freezer failed {FREEZE_ATTEMPTS} times)"


async def _thaw(cluster: ComposeCluster, faults: Faults, service: str) -> None:
    if service in faults.paused:
        await _docker(cluster, "unpause", service)
        faults.paused.discard(service)
    if service in faults.sigstopped:
        await _docker(cluster, "kill", service, "--signal", "CONT")
        faults.sigstopped.discard(service)


async def pause(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    victim = env.rng.choice(BROKERS)
    how = await _freeze(cluster, faults, victim)
    seconds = env.rng.uniform(5, 7)
    await trio.sleep(seconds)
    await _thaw(cluster, faults, victim)
    return f"{how} of {victim} for {seconds:.1f} s"


async def sigterm_controller(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    victim = f"broker{await env.controller()}"
    await _docker(cluster, "stop", victim, "-t", "60")
    await trio.sleep(env.rng.uniform(2, 3))
    await _docker(cluster, "start", victim)
    return f"docker stop (SIGTERM) of the controller {victim}, then docker start"


async def disconnect_leader(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    victim = f"broker{await env.leader_of(0)}"
    await trio.to_thread.run_sync(cluster.disconnect, victim)
    faults.disconnected.add(victim)
    seconds = env.rng.uniform(8, 10)
    await trio.sleep(seconds)
    await trio.to_thread.run_sync(cluster.connect, victim)
    faults.disconnected.discard(victim)
    return f"docker network disconnect of {victim} (leader of partition 0) for {seconds:.1f} s"


def _zk_rules(cluster: ComposeCluster, service: str) -> tuple[str, list[list[str]]]:
    """The container's pid and the iptables rules that cut it off every ZooKeeper node."""
    pid = str(cluster.inspect(service)["State"]["Pid"])
    rules = []
    for zk in ZOOKEEPERS:
        ip = cluster.inspect(zk)["NetworkSettings"]["Networks"][cluster.network()]["IPAddress"]
        rules += [["OUTPUT", "-d", ip, "-j", "DROP"], ["INPUT", "-s", ip, "-j", "DROP"]]
    return pid, rules


def _iptables_in(pid: str, action: str, rule: list[str]) -> None:
    subprocess.run(["nsenter", "-t", pid, "-n", "iptables", action, *rule], check=True, capture_output=True, timeout=10)


async def partition_from_zookeeper(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    """The leader of partition 0 loses ZooKeeper (its session expires) but still reaches the
    other brokers and the clients: the controller moves its leaderships; it must not go on
    acknowledging writes as a zombie leader."""
    victim = f"broker{await env.leader_of(0)}"
    pid, rules = await trio.to_thread.run_sync(_zk_rules, cluster, victim)
    for rule in rules:
        await trio.to_thread.run_sync(_iptables_in, pid, "-I", rule)
    faults.zk_blocked[victim] = rules
    seconds = env.rng.uniform(10, 12)
    await trio.sleep(seconds)
    await _unblock(cluster, faults, victim)
    return f"{victim} (leader of partition 0) cut off from ZooKeeper only for {seconds:.1f} s"


async def _unblock(cluster: ComposeCluster, faults: Faults, service: str) -> None:
    pid = str(cluster.inspect(service)["State"]["Pid"])
    for rule in faults.zk_blocked.pop(service, []):
        await trio.to_thread.run_sync(_iptables_in, pid, "-D", rule)


def _zookeeper_modes(cluster: ComposeCluster) -> dict[str, str]:
    """{ZooKeeper service: its `srvr` mode (leader, follower, or "" when not serving)}."""
    modes = {}
    for zk in ZOOKEEPERS:
        r = subprocess.run(
            ["docker", "exec", cluster.container(zk), "sh", "-c", "echo srvr | nc -w 2 127.0.0.1 2181"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        found = [line.split(":", 1)[1].strip() for line in r.stdout.splitlines() if line.startswith("Mode:")]
        modes[zk] = found[0] if found else ""
    return modes


async def _kill_zookeepers(env: Env, cluster: ComposeCluster, faults: Faults, count: int) -> tuple[list[str], float]:
    """Kill the ensemble's leader (and followers up to `count`), wait, start them again."""
    modes = await trio.to_thread.run_sync(_zookeeper_modes, cluster)
    victims = sorted(modes, key=lambda zk: modes[zk] != "leader")[:count]
    for victim in victims:
        await _docker(cluster, "kill", victim)
        faults.stopped.add(victim)
    seconds = env.rng.uniform(8, 10)
    await trio.sleep(seconds)
    for victim in victims:
        await _docker(cluster, "start", victim)
        faults.stopped.discard(victim)
    return victims, seconds


async def kill_zookeeper_leader(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    """One ZooKeeper node down (the ensemble's leader): the other two elect a leader and keep the
    quorum; the brokers' sessions move to them. Nothing may be lost and nothing may stop."""
    victims, seconds = await _kill_zookeepers(env, cluster, faults, 1)
    return f"docker kill of {victims[0]} (the ZooKeeper leader) for {seconds:.1f} s; two nodes keep the quorum"


async def kill_two_zookeepers(env: Env, cluster: ComposeCluster, faults: Faults) -> str:
    """Two ZooKeeper nodes down: no quorum. As in Kafka, the leaders keep serving produce and
    fetch; what needs ZooKeeper (ISR changes, elections, new sessions) waits for the quorum."""
    victims, seconds = await _kill_zookeepers(env, cluster, faults, 2)
    return f"docker kill of {' and '.join(victims)}: no ZooKeeper quorum for {seconds:.1f} s"


SCENARIOS = {
    "docker-kill-leader": kill_leader,
    "docker-pause-broker": pause,
    "docker-sigterm-controller": sigterm_controller,
    "docker-disconnect-leader": disconnect_leader,
    "docker-zk-partition": partition_from_zookeeper,
    "docker-kill-zk-leader": kill_zookeeper_leader,
    "docker-kill-2-zk-nodes": kill_two_zookeepers,
}


async def heal(env: Env, cluster: ComposeCluster, faults: Faults, wait_isr: bool = True) -> float:
    """Every fault undone and every broker container running; then (with `wait_isr`) until the
    workload topic's ISR is full. Returns when the containers were all running (trio's clock)."""
    for service in {*faults.paused, *faults.sigstopped}:
        await _thaw(cluster, faults, service)
    for service in list(faults.disconnected):
        await trio.to_thread.run_sync(cluster.connect, service)
    for service in list(faults.zk_blocked):
        await _unblock(cluster, faults, service)
    for service in (*ZOOKEEPERS, *BROKERS):
        if not (await trio.to_thread.run_sync(cluster.inspect, service))["State"]["Running"]:
            await _docker(cluster, "start", service)
    faults.stopped.clear()
    healed_at = trio.current_time()
    if wait_isr:
        await wait_full_isr(env, 90)
    return healed_at


async def replica_records(cluster: ComposeCluster, service: str, topic: str, partition: int) -> list:
    """(offset, value) of every record in the partition's segment files inside the container."""
    directory = f"/var/lib/minikafka/{topic}-{partition}"
    r = await trio.run_process(
        ["docker", "exec", cluster.container(service), "sh", "-c", f"cat $(ls {directory}/*.log | sort)"],
        capture_stdout=True,
        capture_stderr=True,
    )
    data = r.stdout
    return [
        (rec.offset, rec.value) for pos, header in rb.iter_batches(data) for rec in rb.decode_records(data, pos, header)
    ]


async def run_scenario(name: str, seed: int, cluster: ComposeCluster, workload_s: float = 14.0) -> tuple[Report, str]:
    containers = {i: Container(f"broker{i}", port) for i, port in enumerate(cluster.ports, 1)}
    env = Env(Path("."), None, containers, random.Random(f"{seed}-{name}"), [], topic=f"chaos-{name}")
    faults = Faults(set(), set(), {})
    await create_topic(env)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        start_workload(nursery, env, stop)
        await trio.sleep(2)
        try:
            what = await SCENARIOS[name](env, cluster, faults)
            await trio.sleep(max(0.0, workload_s - 2))
        finally:
            with trio.CancelScope(shield=True):
                healed_at = await heal(env, cluster, faults, wait_isr=False)
        judged = await liveness.measure(env, healed_at)
        await wait_full_isr(env, 90)
        stop.set()
        nursery.cancel_scope.deadline = trio.current_time() + 60  # producers settle what they wait for
    await trio.sleep(1)
    md = await env.metadata()
    leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
    isr = {p.partition_index: list(p.isr_nodes) for p in md.topics[0].partitions}
    async with Cluster.open(env.bootstrap, retries=30) as client:
        hws = {p: await list_offset(client, env.topic, p, LATEST) for p in range(PARTITIONS)}
    replicas = {
        p: {i: await replica_records(cluster, f"broker{i}", env.topic, p) for i in containers}
        for p in range(PARTITIONS)
    }
    report = check(env.history, replicas, leaders, isr, hws, in_order=True)
    report.liveness = judged
    return report, what


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="chaos scenarios against the docker-compose cluster")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS), help="run only these scenarios")
    args = parser.parse_args(argv)
    reason = docker_unavailable()
    if reason:
        print(f"chaos-docker: {reason}", file=sys.stderr)
        return 1
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"chaos seed {seed} (--seed {seed} reproduces this run's choices)")
    build_images(log=lambda line: print(line, file=sys.stderr))
    cluster = ComposeCluster(
        f"minikafka-chaos-{os.getpid()}",
        (free_port(), free_port(), free_port()),
        metrics_ports=(free_port(), free_port(), free_port()),
    )
    failures = 0
    try:
        print(f"compose cluster healthy in {cluster.up():.0f} s", file=sys.stderr)
        print(
            f"{'scenario':26} {'sent':>7} {'acked':>6} {'failed':>6} {'lost':>5} {'dups':>5} {'no leader s':>10} "
            f"{'heal s':>6}  verdict (safety, liveness)"
        )
        rows = []
        for name in args.only or list(SCENARIOS):
            report, what = trio.run(run_scenario, name, seed, cluster)
            print(format_row(f"{name:26}", report, what), flush=True)
            failures += (0 if report.ok else 1) + (0 if report.liveness.ok else 1)
            rows.append(markdown_row(name, report, what))
    finally:
        cluster.down()
    if not args.only:
        publish_table(seed, rows)
    return 1 if failures else 0


def markdown_row(name: str, report: Report, what: str) -> str:
    live = report.liveness
    heal = "-" if live is None or live.heal_s is None else f"{live.heal_s:.1f}"
    verdict = ("ok" if report.ok else f"VIOLATIONS {report.violations()}") + (
        ", live" if live is not None and live.ok else f", NOT LIVE {live.violations() if live else ''}"
    )
    return (
        f"| {name} | {what} | {report.attempted:,} | {report.acked:,} | {report.failed:,} | {len(report.lost)} | "
        f"{len(report.duplicated)} | {report.max_leaderless_s:.1f} | {heal} | {verdict} |"
    )


def publish_table(seed: int, rows: list[str]) -> None:
    """The run's table in `bench/results/chaos_docker.md` and docs/chaos.md's `chaos:docker` section."""
    import re

    header = (
        f"Seed {seed}. sent / acked / failed: the workload's produce requests; lost and dups: acknowledged\n"
        "records missing from, or twice in, the replicas' logs; heal s: until every partition was led and\n"
        "fully replicated after the heal.\n\n"
        "| scenario | nemesis | sent | acked | failed | lost | dups | no leader s | heal s | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    table = header + "\n".join(rows) + "\n"
    root = Path(__file__).resolve().parent.parent
    (root / "bench" / "results" / "chaos_docker.md").write_text(table)
    readme = root / "docs" / "chaos.md"
    start, end = "<!-- chaos:docker:start -->", "<!-- chaos:docker:end -->"
    text = readme.read_text()
    if start in text:
        readme.write_text(re.sub(re.escape(start) + ".*?" + re.escape(end), f"{start}\n{table}{end}", text, flags=re.S))


if __name__ == "__main__":
    sys.exit(main())
