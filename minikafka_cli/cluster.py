"""`minikafka cluster up|status|down|kill|stop|start`: an embedded local cluster (ZooKeeper from the
apt package + N broker processes) that lives in the background, under `--dir` (default
`./.minikafka`).

`up` writes `<dir>/cluster.json` (pids, ports, directories) and returns once every broker is
registered and a controller is active, printing the bootstrap address. `up --security ssl |
sasl_plaintext | sasl_ssl` secures every listener (`local_cluster/secure.py`: a CA and
certificates, SASL users, the ACL authorizer with an admin super user) and writes the admin's
client settings to `<dir>/client.properties`; `status` then connects with them. The other subcommands read
that file and act only on the processes it lists (a pid is only signalled while its command line is
still the one recorded, so a recycled pid is never hit).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import trio

from client import Cluster, ConnectionClosed
from client.admin import wait_for_brokers
from local_cluster import secure
from local_cluster.brokers import BrokerProcess, BrokerStartError, quickstart_settings
from local_cluster.zookeeper import ZooKeeperError, ZooKeeperProcess, four_letter
from metrics.scrape import BrokerHealth, scrape
from storage.cleaner.manager import dirty_state_on_disk

STATE = "cluster.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start ZooKeeper and the brokers in the background")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers, ids 1..N (default 3)")
    up.add_argument("--zookeeper-port", type=int, default=2181)
    up.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1")
    up.add_argument(
        "--metrics-base-port",
        type=int,
        default=None,
        help="broker i serves Prometheus metrics on metrics-base-port + i - 1 (default base-port + 1000; -1: off)",
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker configuration for every broker (repeatable)",
    )
    up.add_argument(
        "--security",
        choices=secure.PROTOCOLS,
        default="plaintext",
        help="secure the listeners: TLS, SASL or both, with ACLs and an admin super user (default plaintext)",
    )
    for name, text in (
        ("status", "brokers, controller, topics, under-replicated and offline partitions, log cleaner state"),
        ("down", "stop everything this cluster started"),
    ):
        sub.add_parser(name, help=text)
    for name, text in (
        ("kill", "SIGKILL a broker"),
        ("stop", "SIGTERM a broker (controlled shutdown)"),
        ("start", "start a stopped broker again (same config, same log dir)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("broker_id", type=int)
    for p in sub.choices.values():
        p.add_argument("--dir", type=Path, default=Path(".minikafka"), help="cluster directory (default .minikafka)")


class ClusterError(Exception):
    pass


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(entry: dict) -> bool:
    return bool(entry.get("pid")) and entry.get("marker", "") in _cmdline(entry["pid"])


def _load(directory: Path) -> dict:
    try:
        return json.loads((directory / STATE).read_text())
    except FileNotFoundError:
        raise ClusterError(f"no cluster in {directory} (run `minikafka cluster up --dir {directory}`)") from None


def _save(directory: Path, state: dict) -> None:
    """cluster.json, plus a pid file beside each process's files (zookeeper/zookeeper.pid,
    broker-N/broker.pid) for operators."""
    (directory / STATE).write_text(json.dumps(state, indent=2))
    (directory / "zookeeper" / "zookeeper.pid").write_text(f"{state['zookeeper']['pid']}\n")
    for _i, b in state["brokers"].items():
        if b.get("dir"):
            (Path(b["dir"]) / "broker.pid").write_text(f"{b['pid']}\n")


def _signal(entry: dict, sig: int) -> bool:
    if not _alive(entry):
        return False
    os.kill(entry["pid"], sig)
    return True


def _wait_gone(entry: dict, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while _alive(entry) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(entry):
        os.kill(entry["pid"], signal.SIGKILL)


#: `cluster up`'s ZooKeeper session timeout (Kafka's default is 18000 ms). A killed broker's
#: partitions stay leaderless until its session ends, so shorter is faster failover; but a broker
#: stalled longer than this (a loaded host, a long collection) loses its session and its
#: leaderships. 3000 ms expired under load; 6000 ms keeps failover within a few seconds.
SESSION_TIMEOUT_MS = "6000"


def _start_broker(directory: Path, broker_id: int, entry: dict, zk_connect: str, overrides: dict) -> dict:
    overrides = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, **overrides}
    protocol = overrides.get("inter.broker.listener.name")
    if protocol:  # a secured cluster: its one listener, on the same port layout
        overrides = {**overrides, "listeners": f"{protocol}://127.0.0.1:{entry['port']}"}
    if entry.get("metrics_port") is not None:
        overrides = {**overrides, "metrics.port": str(entry["metrics_port"]), "metrics.host": "127.0.0.1"}
    broker = BrokerProcess.create(
        broker_id, directory / f"broker-{broker_id}", zk_connect, port=entry["port"], **overrides
    )
    broker.start(detached=True)
    config = str(broker.directory / "server.properties")
    started = {**entry, "pid": broker.process.pid, "marker": config, "dir": str(broker.directory)}
    if broker.metrics_url:
        started["metrics_url"] = broker.metrics_url
    return started


def _did_not_start(broker_id: int, e: BrokerStartError) -> str:
    """One line for a broker that did not start: how it ended, and the last thing it said
    (its own "cannot start: ..." line, or a traceback's last line)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not lines:
        return f"broker {broker_id} did not start"
    said = [line for line in lines[1:] if line.startswith("minikafka broker:")] or lines[-1:]
    summary = f"broker {broker_id} did not start: {lines[0].rstrip(':')}"
    return f"{summary}: {said[-1]}" if len(lines) > 1 else summary


def _client_security(directory: Path):
    """The admin's settings of a secured cluster (its client.properties), else PLAINTEXT."""
    from broker.config import parse_properties
    from security.config import client_security

    path = directory / "client.properties"
    return client_security(parse_properties(path.read_text())) if path.exists() else None


def up(args) -> int:
    directory = args.dir.resolve()
    if (directory / STATE).exists():
        state = _load(directory)
        if _alive(state["zookeeper"]) or any(_alive(b) for b in state["brokers"].values()):
            raise ClusterError(f"a cluster is already running in {directory} (`minikafka cluster down` first)")
    directory.mkdir(parents=True, exist_ok=True)
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ClusterError(f"--override {item!r} is not KEY=VALUE")
        overrides[key.replace(".", "_")] = value
    # as Kafka's quickstart server.properties: groups and transactions work on a cluster smaller
    # than 3 brokers and the first rebalance does not wait
    for key, value in quickstart_settings(args.brokers).items():
        overrides.setdefault(key.replace(".", "_"), value)
    (directory / "client.properties").unlink(missing_ok=True)
    setup = None
    if args.security != "plaintext":
        setup = secure.prepare(directory, args.security)
        overrides.update(setup.broker_overrides)
        (directory / "client.properties").write_text(secure.properties_text(setup.client_properties))
        (directory / "client.properties").chmod(0o600)
    started = time.monotonic()
    try:
        zk = ZooKeeperProcess.start(
            directory / "zookeeper",
            port=args.zookeeper_port,
            sasl_users=setup.zookeeper_users if setup is not None else None,
        )
    except ZooKeeperError as e:
        raise ClusterError(str(e)) from None
    if setup is not None:
        secure.write_admin_credentials(zk.connect, setup)
    state = {
        "zookeeper": {"pid": zk.process.pid, "port": zk.port, "marker": str(directory / "zookeeper" / "zoo.cfg")},
        "brokers": {},
        "overrides": overrides,
    }
    _save(directory, state)
    metrics_base = args.base_port + 1000 if args.metrics_base_port is None else args.metrics_base_port
    for i in range(1, args.brokers + 1):
        entry: dict = {"port": args.base_port + i - 1}
        if metrics_base >= 0:
            entry["metrics_port"] = metrics_base + i - 1
        try:
            state["brokers"][str(i)] = _start_broker(directory, i, entry, zk.connect, overrides)
        except BrokerStartError as e:
            _save(directory, state)
            raise ClusterError(_did_not_start(i, e)) from None
        _save(directory, state)
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"].values())
    controller = trio.run(wait_for_brokers, bootstrap, args.brokers, 60, _client_security(directory))
    print(
        f"cluster up in {time.monotonic() - started:.1f} s: ZooKeeper 127.0.0.1:{zk.port}, "
        f"{args.brokers} brokers, controller {controller}"
    )
    print(f"bootstrap servers: {bootstrap}")
    for i, b in state["brokers"].items():
        if b.get("metrics_url"):
            print(f"broker {i} metrics: {b['metrics_url']}, web console: {b['metrics_url'].removesuffix('metrics')}")
    if setup is not None:
        print(f"security: {setup.protocol}, ACLs on; admin settings in {directory / 'client.properties'}")
        print(f"  minikafka ... --command-config {directory / 'client.properties'}")
        print("  confluent-kafka / kcat: " + " ".join(f"-X {k}={v}" for k, v in setup.librdkafka.items()))
    return 0


def _health(entry: dict) -> str:
    """The broker's health summary from its own metrics (`metrics/scrape.py`), or ""."""
    if not entry.get("metrics_url"):
        return ""
    try:
        return " - " + BrokerHealth.of(scrape(entry["metrics_url"])).summary()
    except OSError as e:
        return f" - metrics unavailable ({e})"


async def _status(state: dict, security=None) -> None:
    live = {i: b for i, b in state["brokers"].items() if _alive(b)}
    zk_ok = four_letter(state["zookeeper"]["port"], "ruok") == "imok"
    print(f"ZooKeeper 127.0.0.1:{state['zookeeper']['port']}: {'up' if zk_ok else 'DOWN'}")
    for i, b in sorted(state["brokers"].items(), key=lambda kv: int(kv[0])):
        print(f"broker {i}: 127.0.0.1:{b['port']} {'up' if i in live else 'DOWN'}{_health(b) if i in live else ''}")
    if not live:
        return
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in live.values())
    async with Cluster.open(bootstrap, retries=2, security=security) as cluster:
        md = await cluster.refresh_metadata(None)
    print(f"controller: {md.controller_id}")
    under = [
        (t, p) for t, parts in md.topics.items() for p, info in parts.items() if len(info.isr) < len(info.replicas)
    ]
    offline = [(t, p) for t, parts in md.topics.items() for p, info in parts.items() if info.leader < 0]
    print(f"topics: {len(md.topics)} ({', '.join(sorted(md.topics)) or 'none'})")
    print(f"under-replicated partitions: {len(under)}" + (f" {sorted(under)}" if under else ""))
    print(f"offline partitions: {len(offline)}" + (f" {sorted(offline)}" if offline else ""))
    for i, b in sorted(state["brokers"].items(), key=lambda kv: int(kv[0])):
        cleaned = dirty_state_on_disk(Path(b["dir"]) / "logs") if b.get("dir") else []
        if not cleaned:
            print(f"log cleaner, broker {i}: no compacted log cleaned yet")
            continue
        worst = max(cleaned, key=lambda s: s.dirty_ratio)
        print(
            f"log cleaner, broker {i}: {len(cleaned)} compacted logs cleaned, dirtiest "
            f"{worst.tp[0]}-{worst.tp[1]} (dirty ratio {worst.dirty_ratio:.2f}, cleaned up to offset "
            f"{worst.first_dirty_offset})"
        )


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "up":
            return up(args)
        directory = args.dir.resolve()
        state = _load(directory)
        if args.action == "status":
            trio.run(_status, state, _client_security(directory))
            return 0
        if args.action == "down":
            for entry in state["brokers"].values():
                _signal(entry, signal.SIGTERM)
            for entry in state["brokers"].values():
                _wait_gone(entry, 60)
            _signal(state["zookeeper"], signal.SIGTERM)
            _wait_gone(state["zookeeper"], 10)
            print("cluster down")
            return 0
        entry = state["brokers"].get(str(args.broker_id))
        if entry is None:
            raise ClusterError(f"broker {args.broker_id} is not part of this cluster")
        if args.action in ("kill", "stop"):
            if not _signal(entry, signal.SIGKILL if args.action == "kill" else signal.SIGTERM):
                raise ClusterError(f"broker {args.broker_id} is not running")
            if args.action == "stop":
                _wait_gone(entry, 60)
            print(f"broker {args.broker_id} {'killed' if args.action == 'kill' else 'stopped'}")
            return 0
        if _alive(entry):
            raise ClusterError(f"broker {args.broker_id} is already running")
        zk_connect = f"127.0.0.1:{state['zookeeper']['port']}"
        try:
            state["brokers"][str(args.broker_id)] = _start_broker(
                directory, args.broker_id, entry, zk_connect, state.get("overrides", {})
            )
        except BrokerStartError as e:
            raise ClusterError(_did_not_start(args.broker_id, e)) from None
        _save(directory, state)
        print(f"broker {args.broker_id} started on 127.0.0.1:{entry['port']}")
        return 0
    except (ClusterError, ConnectionClosed, trio.TooSlowError) as e:
        print(f"minikafka cluster: {e or 'timed out'}", file=sys.stderr)
        return 1
