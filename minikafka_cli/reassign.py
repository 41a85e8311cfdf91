"""`minikafka reassign-partitions`, with kafka-reassign-partitions.sh's actions and JSON files:
- `--generate --topics-to-move-json-file F --broker-list 2,3,4`: print the current assignment of
  the topics in F (`{"topics": [{"topic": "t"}], "version": 1}`) and a proposed one over the
  brokers listed (Kafka's rack-unaware placement, same partition count and replication factor);
- `--execute --reassignment-json-file F`: print the current assignment (to save for a rollback)
  and start the reassignments in F (`{"version": 1, "partitions": [{"topic": "t", "partition": 0,
  "replicas": [2, 3, 4]}]}`) through AlterPartitionReassignments;
- `--verify --reassignment-json-file F`: whether each is completed or still in progress;
- `--cancel --reassignment-json-file F`: cancel them (their partitions go back to the origin).
Exit 1 when a partition's request failed, 2 for bad arguments or files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from client import Cluster
from client.admin import alter_reassignments, list_reassignments
from controller.assignment import InvalidReplicationFactor, assign_replicas
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    for name, text in (
        ("--generate", "propose an assignment of --topics-to-move-json-file over --broker-list"),
        ("--execute", "start the reassignments of --reassignment-json-file"),
        ("--verify", "report whether the reassignments of --reassignment-json-file completed"),
        ("--cancel", "cancel the reassignments of --reassignment-json-file"),
    ):
        action.add_argument(name, action="store_true", help=text)
    parser.add_argument("--topics-to-move-json-file", type=Path)
    parser.add_argument("--broker-list", help="broker ids for --generate, comma separated")
    parser.add_argument("--reassignment-json-file", type=Path)


def _read_json(path: Path | None, option: str):
    if path is None:
        raise ValueError(f"this action needs {option}")
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON: {e}") from None


def read_reassignment(path: Path | None) -> dict[tuple[str, int], list[int]]:
    body = _read_json(path, "--reassignment-json-file")
    try:
        return {(str(p["topic"]), int(p["partition"])): [int(r) for r in p["replicas"]] for p in body["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is not Kafka's reassignment JSON: {e}") from None


def assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    partitions = [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions})


async def _current(cluster: Cluster, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    md = await cluster.refresh_metadata(topics)
    missing = [t for t in topics if t not in md.topics]
    if missing:
        raise ValueError(f"unknown topics: {', '.join(missing)}")
    return {(t, p): list(info.replicas) for t in topics for p, info in md.topics[t].items()}


def _report(results, success: str) -> int:
    ok = [name for name, code, _ in results if code == ErrorCode.NONE]
    if ok:
        print(f"{success}{','.join(ok)}")
    for name, code, message in results:
        if code != ErrorCode.NONE:
            print(f"minikafka reassign-partitions: {name}: {ErrorCode(code).name}: {message}", file=sys.stderr)
    return 0 if len(ok) == len(results) else 1


async def _run(args) -> int:
    async with open_cluster(args) as cluster:
        if args.generate:
            body = _read_json(args.topics_to_move_json_file, "--topics-to-move-json-file")
            try:
                topics = [str(t["topic"]) for t in body["topics"]]
                brokers = [int(b) for b in (args.broker_list or "").split(",") if b.strip()]
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"bad --topics-to-move-json-file or --broker-list: {e}") from None
            if not brokers:
                raise ValueError("--generate needs --broker-list")
            current = await _current(cluster, topics)
            proposed = {}
            for topic in topics:
                parts = sorted(p for t, p in current if t == topic)
                try:
                    placed = assign_replicas(len(parts), len(current[(topic, parts[0])]), brokers)
                except InvalidReplicationFactor as e:
                    raise ValueError(f"topic {topic}: {e}") from None
                proposed.update({(topic, p): placed[i] for i, p in enumerate(parts)})
            print(f"Current partition replica assignment\n{assignment_json(current)}\n")
            print(f"Proposed partition reassignment configuration\n{assignment_json(proposed)}")
            return 0
        targets = read_reassignment(args.reassignment_json_file)
        if args.execute:
            current = await _current(cluster, sorted({t for t, _ in targets}))
            print(f"Current partition replica assignment\n\n{assignment_json(current)}\n")
            print("Save this to use as the --reassignment-json-file option during rollback")
            results = await alter_reassignments(cluster, dict(targets))
            return _report(results, "Successfully started partition reassignments for ")
        if args.cancel:
            results = await alter_reassignments(cluster, {tp: None for tp in targets})
            return _report(results, "Successfully cancelled partition reassignments for: ")
        ongoing = await list_reassignments(cluster)
        current = await _current(cluster, sorted({t for t, _ in targets}))
        print("Status of partition reassignment:")
        for tp, target in sorted(targets.items()):
            name = f"{tp[0]}-{tp[1]}"
            if tp in ongoing:
                print(f"Reassignment of partition {name} is still in progress.")
            elif current.get(tp) == target:
                print(f"Reassignment of partition {name} is completed.")
            else:
                replicas = ",".join(map(str, current.get(tp, [])))
                wanted = ",".join(map(str, target))
                print(
                    f"There is no active reassignment of partition {name}, but replica set is {replicas} rather than {wanted}."
                )
        return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("reassign-partitions", _run, args)
    return status or result
