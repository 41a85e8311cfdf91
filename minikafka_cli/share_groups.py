"""`minikafka share-groups`: share group (KIP-932) administration modelled on Kafka 4's
`kafka-share-groups.sh`.

- `--list`: every share group and its state;
- `--describe --group G` (`--offsets`, the default): GROUP, TOPIC, PARTITION, START-OFFSET
  (the share-partition start offset: every record before it is acknowledged or archived) and
  LAG (the partition's high watermark minus the start offset: records not yet done); `--members`:
  each member's id, host, client id, epoch and assigned partitions; `--state`: the group's state,
  epochs, assignor and member count;
- `--delete --group G`: only a group without members (NON_EMPTY_GROUP otherwise).
Exit status 1 with a one-line message for a Kafka error (GROUP_ID_NOT_FOUND, ...), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from client import Cluster
from client import groups as g
from client import share_groups as sg
from client.reads import LATEST, list_offset
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio, write_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the share groups")
    action.add_argument("--describe", action="store_true", help="describe a share group")
    action.add_argument("--delete", action="store_true", help="delete a share group without members")
    parser.add_argument("--group", help="the share group (--describe, --delete)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true", help="describe: start offset and lag per partition (default)")
    shown.add_argument("--members", action="store_true", help="describe: the members and their assignments")
    shown.add_argument("--state", action="store_true", help="describe: the group's state and epochs")


async def _run(args: argparse.Namespace, out) -> None:
    async with open_cluster(args) as cluster:
        if args.list:
            groups = [x for x in await g.list_groups(cluster) if x.get("group_type") == "share"]
            write_table([["GROUP", "STATE"]] + [[x["group_id"], x["group_state"]] for x in groups], out)
        elif args.delete:
            await g.delete_group(cluster, args.group)
            out.write(f"Share group '{args.group}' deleted successfully.\n")
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
    for (topic, partition), (start, _) in sorted(offsets.items()):
        if start < 0:
            rows.append([group_id, topic, partition, "-", "-"])
            continue
        end = await list_offset(cluster, topic, partition, LATEST)
        rows.append([group_id, topic, partition, start, max(0, end - start)])
    write_table(rows, out)


def run(args: argparse.Namespace) -> int:
    if (args.describe or args.delete) and not args.group:
        print("minikafka share-groups: --describe and --delete need --group", file=sys.stderr)
        return 2
    status, _ = run_trio("share-groups", _run, args, sys.stdout)
    return status
