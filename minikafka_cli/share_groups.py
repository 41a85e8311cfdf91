"""`minikafka share-groups`: share group (KIP-932) administration modelled on Kafka 4's
`kafka-share-groups.sh`.

- `--list`: every share group and its state;
- `--describe --group G` (`--offsets`, the default): GROUP, TOPIC, PARTITION, START-OFFSET
  (the share-partition start offset: every record before it is acknowledged or archived) and
  LAG (records not yet done: the broker's DescribeShareGroupOffsets v1 lag, the high watermark
  less the start offset less the records done past it; from a v0 broker the high watermark minus
  the start offset); `--members`:
  each member's id, host, client id, epoch and assigned partitions; `--state`: the group's state,
  epochs, assignor and member count;
- `--delete --group G`: only a group without members (NON_EMPTY_GROUP otherwise); its share
  state goes with it;
- `--reset-offsets --group G (--topic T ... | --all-topics) (--to-earliest | --to-latest |
  --to-offset N | --to-datetime T) [--dry-run | --execute]`: prints each partition's new start
  offset, and applies them (AlterShareGroupOffsets) only with `--execute`; a group that does not
  exist yet is created; one with members is refused (NON_EMPTY_GROUP);
- `--delete-offsets --group G --topic T ...`: the group forgets its state on the topics
  (DeleteShareGroupOffsets) and next reads them where `share.auto.offset.reset` says.
Exit status 1 with a one-line message for a Kafka error (GROUP_ID_NOT_FOUND, ...), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from client import Cluster
from client import groups as g
from client import share_groups as sg
from client.reads import LATEST, list_offset
from minikafka_cli import offset_reset
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio, write_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the share groups")
    action.add_argument("--describe", action="store_true", help="describe a share group")
    action.add_argument("--delete", action="store_true", help="delete a share group without members")
    action.add_argument("--reset-offsets", action="store_true", help="set the start offsets of a group's partitions")
    action.add_argument("--delete-offsets", action="store_true", help="forget a group's state on topics")
    parser.add_argument("--group", help="the share group (all but --list)")
    parser.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    parser.add_argument("--all-topics", action="store_true", help="reset-offsets: every topic the group has read")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true", help="describe: start offset and lag per partition (default)")
    shown.add_argument("--members", action="store_true", help="describe: the members and their assignments")
    shown.add_argument("--state", action="store_true", help="describe: the group's state and epochs")
    offset_reset.add_arguments(parser, shift=False)


async def _run(args: argparse.Namespace, out) -> None:
    async with open_cluster(args) as cluster:
        if args.list:
            groups = [x for x in await g.list_groups(cluster) if x.get("group_type") == "share"]
            write_table([["GROUP", "STATE"]] + [[x["group_id"], x["group_state"]] for x in groups], out)
        elif args.delete:
            await g.delete_group(cluster, args.group)
            out.write(f"Share group '{args.group}' deleted successfully.\n")
        elif args.reset_offsets:
            await _reset(cluster, args, out)
        elif args.delete_offsets:
            await sg.delete_share_group_offsets(cluster, args.group, args.topic)
            out.write(f"Share group '{args.group}' forgot its offsets on {', '.join(args.topic)}.\n")
        elif args.members:
            await _members(cluster, args.group, out)
        elif args.state:
            d = await sg.describe_share_group(cluster, args.group)
            row = [d["group_id"], d["state"], d["group_epoch"], d["assignment_epoch"], d["assignor"], len(d["members"])]
            write_table([["GROUP", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "ASSIGNOR", "#MEMBERS"], row], out)
        else:
            await _offsets(cluster, args.group, out)


async def _members(cluster: Cluster, group_id: str, out) -> None:
    d = await sg.describe_share_group(cluster, group_id)
    rows: list[list] = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "#PARTITIONS", "ASSIGNMENT"]]
    for m in d["members"]:
        assignment = ",".join(f"{t}:{p}" for t, p in m["assignment"]) or "-"
        row = [group_id, m["member_id"], m["client_host"], m["client_id"], m["member_epoch"], len(m["assignment"])]
        rows.append(row + [assignment])
    write_table(rows, out)


async def _offsets(cluster: Cluster, group_id: str, out) -> None:
    offsets = await sg.share_group_offsets(cluster, group_id)
    rows: list[list] = [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]]
    for (topic, partition), (start, _, lag) in sorted(offsets.items()):
        if start < 0:
            rows.append([group_id, topic, partition, "-", "-"])
            continue
        if lag < 0:  # a broker serving DescribeShareGroupOffsets v0 only: what the HW tells
            lag = max(0, await list_offset(cluster, topic, partition, LATEST) - start)
        rows.append([group_id, topic, partition, start, lag])
    write_table(rows, out)


async def _reset(cluster: Cluster, args: argparse.Namespace, out) -> None:
    if args.all_topics:
        known = await sg.share_group_offsets(cluster, args.group)
        targets = sorted(known)
    else:
        targets = [(t, p) for t in args.topic for p in sorted(await cluster.partitions(t))]
    plan = {(t, p): await offset_reset.new_offset(cluster, args, t, p, None) for t, p in targets}
    write_table(
        [["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"]] + [[args.group, t, p, o] for (t, p), o in plan.items()],
        out,
    )
    if args.execute:
        await sg.alter_share_group_offsets(cluster, args.group, plan)
    else:
        out.write("(dry run: nothing changed; add --execute to apply)\n")


def _usage_error(args: argparse.Namespace) -> str | None:
    if not args.list and not args.group:
        return "every action but --list needs --group"
    if args.reset_offsets:
        if bool(args.topic) == args.all_topics:
            return "--reset-offsets needs --topic or --all-topics"
        try:
            offset_reset.require_spec(args)
        except ValueError as e:
            return str(e)
    if args.delete_offsets and not args.topic:
        return "--delete-offsets needs --topic"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _usage_error(args)
    if problem is not None:
        print(f"minikafka share-groups: {problem}", file=sys.stderr)
        return 2
    status, _ = run_trio("share-groups", _run, args, sys.stdout)
    return status
