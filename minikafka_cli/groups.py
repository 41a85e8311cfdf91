"""`minikafka groups`: consumer group administration modelled on Kafka's
`kafka-consumer-groups.sh`.

- `list`: every group with its protocol type, state and type (classic or consumer, KIP-848);
- `describe --group G [--members | --state]`: GROUP, TOPIC, PARTITION, CURRENT-OFFSET,
  LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID per committed or assigned partition; for a
  consumer group `--state` adds the group and target assignment epochs and `--members` each
  member's epoch and target assignment beside its current one;
- `delete --group G`: only an inactive (Empty) group;
- `reset-offsets --group G (--topic T | --all-topics) (--to-earliest | --to-latest |
  --to-offset N | --to-datetime T | --shift-by N) [--dry-run | --execute]`: prints the plan, and
  commits it only with `--execute`; refused while the group has members, as Kafka's tool does;
- `delete-offsets --group G --topic T [--partition P ...]`.
Exit status 1 with a one-line message for a Kafka error (e.g. NON_EMPTY_GROUP), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from client import Cluster, KafkaError
from client import groups as g
from client.reads import LATEST, list_offset
from minikafka_cli import offset_reset
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio, write_table
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "describe", "delete", "reset-offsets", "delete-offsets"])
    add_connection_arguments(parser)
    parser.add_argument("--group")
    parser.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="reset-offsets: every topic the group committed")
    parser.add_argument("--partition", type=int, action="append", default=[], help="delete-offsets: a partition")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true", help="describe: the members and their assignments")
    shown.add_argument("--state", action="store_true", help="describe: the group's state")
    offset_reset.add_arguments(parser, shift=True)


def _partitions(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assignment.items())) or "-"


async def _describe(cluster: Cluster, args, out) -> int:
    group = await g.describe_group(cluster, args.group)
    consumer = group["type"] == "consumer"
    if args.state:
        rows = [["GROUP", "TYPE", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]]
        rows[0] += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if consumer else []
        row = [args.group, group["type"], group["protocol_type"] or "-", group["protocol"] or "-", group["state"]]
        row.append(len(group["members"]))
        rows.append(row + ([group["group_epoch"], group["assignment_epoch"]] if consumer else []))
        write_table(rows, out)
        return 0
    if args.members:
        rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
        rows[0] += ["MEMBER-EPOCH", "TARGET-ASSIGNMENT"] if consumer else []
        for m in group["members"]:
            count = sum(len(ps) for ps in m["assignment"].values())
            row = [args.group, m["member_id"], m["client_host"], m["client_id"], count, _partitions(m["assignment"])]
            rows.append(row + ([m["member_epoch"], _partitions(m["target_assignment"])] if consumer else []))
        write_table(rows, out)
        return 0
    committed = await g.committed_offsets(cluster, args.group)
    owner = {}
    for m in group["members"]:
        for topic, parts in m["assignment"].items():
            for p in parts:
                owner[(topic, p)] = m
    rows = [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    ]
    for topic, partition in sorted(set(committed) | set(owner)):
        end = await list_offset(cluster, topic, partition, LATEST)
        current = committed.get((topic, partition), -1)
        m = owner.get((topic, partition))
        rows.append(
            [
                args.group,
                topic,
                partition,
                current if current >= 0 else "-",
                end,
                end - current if current >= 0 else "-",
                m["member_id"] if m else "-",
                m["client_host"] if m else "-",
                m["client_id"] if m else "-",
            ]
        )
    if len(rows) == 1:
        out.write(f"Consumer group '{args.group}' has no active members and no committed offsets.\n")
    else:
        if not group["members"]:
            out.write(f"Consumer group '{args.group}' has no active members.\n\n")
        write_table(rows, out)
    return 0


async def _reset(cluster: Cluster, args, out) -> int:
    offset_reset.require_spec(args)
    if not args.topic and not args.all_topics:
        raise ValueError("reset-offsets needs --topic or --all-topics")
    group = await g.describe_group(cluster, args.group)
    if group["state"] not in ("Empty", "Dead"):
        raise KafkaError(
            ErrorCode.NON_EMPTY_GROUP,
            f"assignments can only be reset if the group '{args.group}' is inactive, but the current state is {group['state']}",
        )
    committed = await g.committed_offsets(cluster, args.group)
    if args.all_topics:
        targets = sorted(committed)
    else:
        targets = []
        for topic in args.topic:
            targets += [(topic, p) for p in sorted(await cluster.partitions(topic))]
    plan = {}
    for topic, p in targets:
        plan[(topic, p)] = await offset_reset.new_offset(cluster, args, topic, p, committed.get((topic, p)))
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[args.group, t, p, o] for (t, p), o in plan.items()]
    write_table(rows, out)
    if args.execute:
        await g.commit_offsets(cluster, args.group, plan)
    else:
        out.write("(dry run: nothing committed; add --execute to commit)\n")
    return 0


async def _run(args, out) -> int:
    async with open_cluster(args) as cluster:
        if args.action == "list":
            groups = await g.list_groups(cluster)
            rows = [["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"]] + [
                [x["group_id"], x.get("group_type") or "classic", x["protocol_type"] or "-", x["group_state"]]
                for x in groups
            ]
            write_table(rows, out)
            return 0
        if not args.group:
            raise ValueError(f"{args.action} needs --group")
        if args.action == "describe":
            return await _describe(cluster, args, out)
        if args.action == "delete":
            await g.delete_group(cluster, args.group)
            out.write(f"Deletion of requested consumer group ('{args.group}') was successful.\n")
            return 0
        if args.action == "reset-offsets":
            return await _reset(cluster, args, out)
        if not args.topic:
            raise ValueError("delete-offsets needs --topic")
        targets = []
        for topic in args.topic:
            parts = args.partition or sorted(await cluster.partitions(topic))
            targets += [(topic, p) for p in parts]
        await g.delete_offsets(cluster, args.group, targets)
        out.write(f"Request succeeded for deleting offsets of group '{args.group}'.\n")
        return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("groups", _run, args, sys.stdout)
    return status or result
