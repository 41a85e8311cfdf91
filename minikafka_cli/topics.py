"""`minikafka topics create|list|describe|alter|delete`, as Kafka's kafka-topics.sh does it in
ZooKeeper mode: CreateTopics/DeleteTopics/CreatePartitions (`alter --partitions N`) go to the active
controller (found through Metadata, retried while NOT_CONTROLLER); `describe` prints the topic's
own configs (DescribeConfigs), leader, replicas and ISR per partition, and, for a local cluster
(`--dir`, the `minikafka cluster up` directory), each replica's log cleaner state (dirty ratio)
read off its log dir for the compacted partitions cleaned so far."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from client import KafkaError
from client.admin import TOPIC, create_partitions, describe_configs, on_controller
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from storage.cleaner.manager import DirtyStateOnDisk, dirty_state_on_disk


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    for name, text in (
        ("create", "create a topic"),
        ("list", "list topics"),
        ("describe", "show partitions"),
        ("alter", "add partitions to a topic"),
        ("delete", "delete a topic"),
    ):
        p = sub.add_parser(name, help=text)
        add_connection_arguments(p)
        if name != "list":
            p.add_argument("--topic", required=name != "describe", help="the topic (describe: all when omitted)")
        if name == "describe":
            p.add_argument(
                "--dir",
                type=Path,
                default=Path(".minikafka"),
                help="a local cluster's directory, for the log cleaner state (default .minikafka)",
            )
        if name == "create":
            p.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
            p.add_argument(
                "--replication-factor", type=int, default=-1, help="default: the broker's default.replication.factor"
            )
            p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config")
        if name == "alter":
            p.add_argument("--partitions", type=int, required=True, help="the new, larger partition count")


async def _run(args) -> int:
    async with open_cluster(args) as cluster:
        if args.action == "create":
            configs = []
            for item in args.config:
                key, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"--config {item!r} is not KEY=VALUE")
                configs.append({"name": key, "value": value})
            body = {
                "topics": [
                    {
                        "name": args.topic,
                        "num_partitions": args.partitions,
                        "replication_factor": args.replication_factor,
                        "configs": configs,
                    }
                ],
                "timeout_ms": 30000,
            }
            results = await on_controller(
                cluster,
                ApiKey.CREATE_TOPICS,
                lambda version: body,
                lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics],
            )
            return _report(results, "Created topic {}.")
        if args.action == "delete":

            def delete_body(version):  # v6 names topics in `topics`, v1-5 in `topic_names`
                names = {"topics": [{"name": args.topic}]} if version >= 6 else {"topic_names": [args.topic]}
                return {**names, "timeout_ms": 30000}

            results = await on_controller(
                cluster,
                ApiKey.DELETE_TOPICS,
                delete_body,
                lambda r: [(t.name, t.error_code, None) for t in r.responses],
            )
            return _report(results, "Deleted topic {}.")
        if args.action == "alter":
            results = await create_partitions(cluster, args.topic, args.partitions)
            return _report(results, f"Topic {{}} now has {args.partitions} partitions.")
        md = await cluster.refresh_metadata(None if args.action == "list" or not args.topic else [args.topic])
        if args.action == "list":
            for name in sorted(md.topics):
                print(name)
            return 0
        names = [args.topic] if args.topic else sorted(md.topics)
        for name in names:
            if name not in md.topics:
                raise KafkaError(md.topic_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name)
            parts = md.topics[name]
            rf = max((len(p.replicas) for p in parts.values()), default=0)
            own = [e for e in await describe_configs(cluster, TOPIC, name) if e.config_source == 1]
            configs = ",".join(f"{e.name}={e.value}" for e in sorted(own, key=lambda e: e.name))
            print(f"Topic: {name}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: {configs}")
            cleaner = _cleaner_state(args.dir, name)
            for index, p in sorted(parts.items()):
                dirty = cleaner.get(index, {})
                extra = (
                    "\tDirtyRatio: " + ",".join(f"{b}:{dirty[b].dirty_ratio:.2f}" for b in sorted(dirty))
                    if dirty
                    else ""
                )
                print(
                    f"\tTopic: {name}\tPartition: {index}\tLeader: {p.leader}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}{extra}"
                )
        return 0


def _cleaner_state(cluster_dir: Path, topic: str) -> dict[int, dict[int, DirtyStateOnDisk]]:
    """partition -> broker id -> cleaner state, from a local cluster's log dirs ({} when there is
    no local cluster there or the topic has no cleaned log)."""
    try:
        brokers = json.loads((cluster_dir / "cluster.json").read_text())["brokers"]
    except (OSError, ValueError, KeyError):
        return {}
    out: dict[int, dict[int, DirtyStateOnDisk]] = {}
    for broker_id, entry in brokers.items():
        if "dir" not in entry:
            continue
        for state in dirty_state_on_disk(Path(entry["dir"]) / "logs"):
            if state.tp[0] == topic:
                out.setdefault(state.tp[1], {})[int(broker_id)] = state
    return out


def _report(results, success: str) -> int:
    status = 0
    for name, code, message in results:
        if code == ErrorCode.NONE:
            print(success.format(name))
        else:
            print(
                f"minikafka topics: {name}: {ErrorCode(code).name}{f': {message}' if message else ''}", file=sys.stderr
            )
            status = 1
    return status


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("topics", _run, args)
    return status or result
