"""`minikafka topics create|list|describe|alter|delete`, as Kafka's kafka-topics.sh does it in
ZooKeeper mode: CreateTopics/DeleteTopics/CreatePartitions (`alter --partitions N`) go to the active
controller (found through Metadata, retried while NOT_CONTROLLER); `describe` prints the topic's
own configs (DescribeConfigs), leader, replicas and ISR per partition, and, for a local cluster
(`--dir`, the `minikafka cluster up` directory), each replica's log cleaner state (dirty ratio)
read off its log dir for the compacted partitions cleaned so far.

Kafka's spellings work too: the action as a flag (`minikafka topics --list --bootstrap-server B`),
`--topic` as a regular expression for list/describe, `--exclude-internal`, `--if-not-exists`,
`--if-exists`, `--under-replicated-partitions` and `--unavailable-partitions`."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from client import KafkaError
from client.admin import TOPIC, create_partitions, describe_configs, on_controller
from minikafka_cli.common import add_connection_arguments, key_values, open_cluster, run_trio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from storage.cleaner.manager import DirtyStateOnDisk, dirty_state_on_disk

#: Kafka's action flags and the subcommand each one is (`minikafka topics --list ...`)
KAFKA_ACTIONS = {
    "--create": "create",
    "--list": "list",
    "--describe": "describe",
    "--alter": "alter",
    "--delete": "delete",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("create", "create a topic"),
        ("list", "list topics"),
        ("describe", "show topics' partitions: leader, replicas, ISR"),
        ("alter", "add partitions to a topic"),
        ("delete", "delete a topic"),
    ):
        p = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        add_connection_arguments(p)
        if name in ("create", "alter", "delete"):
            p.add_argument("--topic", required=True, help="the topic")
        else:
            p.add_argument(
                "--topic", help="only topics whose whole name matches this regular expression (default: all)"
            )
            p.add_argument(
                "--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets, ...)"
            )
        if name in ("alter", "delete"):
            p.add_argument("--if-exists", action="store_true", help="do nothing, successfully, if the topic is missing")
        if name == "describe":
            p.add_argument(
                "--dir",
                type=Path,
                default=Path(".minikafka"),
                help="a local cluster's directory, for the log cleaner state (default .minikafka)",
            )
            only = p.add_mutually_exclusive_group()
            only.add_argument(
                "--under-replicated-partitions",
                action="store_true",
                help="only partitions whose ISR is smaller than their replicas",
            )
            only.add_argument(
                "--unavailable-partitions", action="store_true", help="only partitions without a live leader"
            )
        if name == "create":
            p.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
            p.add_argument(
                "--replication-factor", type=int, default=-1, help="default: the broker's default.replication.factor"
            )
            p.add_argument(
                "--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)"
            )
            p.add_argument(
                "--if-not-exists", action="store_true", help="do nothing, successfully, if the topic already exists"
            )
        if name == "alter":
            p.add_argument("--partitions", type=int, required=True, help="the new, larger partition count")


def _selected(args, names) -> list[str]:
    """The topics `list` / `describe` show: --topic as a regular expression over the whole name,
    without internal topics under --exclude-internal. Raises ValueError for a bad expression."""
    try:
        pattern = re.compile(args.topic) if args.topic else None
    except re.error as e:
        raise ValueError(f"--topic {args.topic}: not a regular expression ({e})") from None
    return [
        n
        for n in sorted(names)
        if (pattern is None or pattern.fullmatch(n)) and not (args.exclude_internal and n.startswith("__"))
    ]


async def _run(args) -> int:
    async with open_cluster(args) as cluster:
        if args.action == "create":
            configs = [{"name": k, "value": v} for k, v in key_values(args.config, "--config").items()]
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
            return _report(results, "Created topic {}.", ErrorCode.TOPIC_ALREADY_EXISTS if args.if_not_exists else None)
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
            return _report(
                results, "Deleted topic {}.", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if args.if_exists else None
            )
        if args.action == "alter":
            results = await create_partitions(cluster, args.topic, args.partitions)
            return _report(
                results,
                f"Topic {{}} now has {args.partitions} partitions.",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if args.if_exists else None,
            )
        md = await cluster.refresh_metadata(None)
        if args.action == "list":
            for name in _selected(args, md.topics):
                print(name)
            return 0
        names = _selected(args, md.topics)
        if args.topic and not names:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic matches {args.topic}")
        only = args.under_replicated_partitions or args.unavailable_partitions
        for name in names:
            parts = md.topics[name]
            rf = max((len(p.replicas) for p in parts.values()), default=0)
            if not only:
                own = [e for e in await describe_configs(cluster, TOPIC, name) if e.config_source == 1]
                configs = ",".join(f"{e.name}={e.value}" for e in sorted(own, key=lambda e: e.name))
                print(f"Topic: {name}\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}\tConfigs: {configs}")
            cleaner = _cleaner_state(args.dir, name)
            for index, p in sorted(parts.items()):
                if args.under_replicated_partitions and len(p.isr) >= len(p.replicas):
                    continue
                if args.unavailable_partitions and p.leader in md.brokers:
                    continue
                dirty = cleaner.get(index, {})
                extra = (
                    "\tDirtyRatio: " + ",".join(f"{b}:{dirty[b].dirty_ratio:.2f}" for b in sorted(dirty))
                    if dirty
                    else ""
                )
                print(
                    f"\tTopic: {name}\tPartition: {index}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
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


def _report(results, success: str, tolerated: ErrorCode | None = None) -> int:
    """Print each (name, error code, message): `success` for NONE, nothing for `tolerated`
    (--if-exists / --if-not-exists), else one error line (status 1)."""
    status = 0
    for name, code, message in results:
        if code == ErrorCode.NONE:
            print(success.format(name))
        elif code == tolerated:
            continue
        else:
            print(
                f"minikafka topics: {name}: {ErrorCode(code).name}{f': {message}' if message else ''}", file=sys.stderr
            )
            status = 1
    return status


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("topics", _run, args)
    return status or result
