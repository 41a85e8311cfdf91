"""`minikafka groups`: consumer group administration, as Kafka's `kafka-consumer-groups.sh`.

One subcommand per action, each with its own `--help`; Kafka's action flags work too
(`minikafka groups --describe --group G --bootstrap-server B`, see `KAFKA_ACTIONS`):

- `list [--state S,...] [--type T,...]`: every group with its type (classic or consumer, KIP-848),
  protocol type and state, filtered as Kafka's `--list --state/--type` filter;
- `describe (--group G ... | --all-groups) [--offsets | --members | --state]`: GROUP, TOPIC,
  PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG, CONSUMER-ID, HOST, CLIENT-ID per committed or
  assigned partition (`--offsets`, the default); for a consumer group `--state` adds the group and
  target assignment epochs and `--members` each member's epoch and target assignment beside its
  current one. A group that does not exist is an error (exit 1);
- `delete (--group G ... | --all-groups)`: only inactive (Empty) groups;
- `reset-offsets (--group G ... | --all-groups) (--topic T[:P,P...] ... | --all-topics) SPEC
  [--dry-run | --execute]`, SPEC one of `--to-earliest`, `--to-latest`, `--to-current`,
  `--to-offset N`, `--to-datetime T`, `--by-duration PnDTnHnMnS`, `--shift-by N`: prints the plan and
  commits it only with `--execute`; refused while the group has members, as Kafka's tool does;
- `delete-offsets --group G --topic T[:P,P...] ...`.
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

#: Kafka's action flags and the subcommand each one is
KAFKA_ACTIONS = {
    "--list": "list",
    "--describe": "describe",
    "--delete": "delete",
    "--reset-offsets": "reset-offsets",
    "--delete-offsets": "delete-offsets",
}
STATES = ("Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "Dead")
TYPES = ("classic", "consumer")


def _groups_arguments(parser: argparse.ArgumentParser, *, all_groups: bool) -> None:
    parser.add_argument("--group", action="append", default=[], help="a consumer group (repeatable)")
    if all_groups:
        parser.add_argument("--all-groups", action="store_true", help="every consumer group")


def _topic_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,P...]",
        help=f"{what} this topic's partitions, or only the listed ones (repeatable)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("list", help="list the consumer groups", description="List the consumer groups.")
    add_connection_arguments(p)
    p.add_argument("--state", help=f"only groups in these states (comma separated: {', '.join(STATES)})")
    p.add_argument("--type", help="only groups of these types (comma separated: classic, consumer)")

    p = sub.add_parser(
        "describe",
        help="describe groups: offsets and lag, members, or state",
        description="Describe consumer groups: their committed offsets and lag (default), members or state.",
    )
    add_connection_arguments(p)
    _groups_arguments(p, all_groups=True)
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--offsets", action="store_true", help="each partition's offset, log end and lag (default)")
    shown.add_argument("--members", action="store_true", help="the members and their assignments")
    shown.add_argument("--state", action="store_true", help="the group's state, protocol and epochs")

    p = sub.add_parser("delete", help="delete inactive groups", description="Delete inactive (Empty) consumer groups.")
    add_connection_arguments(p)
    _groups_arguments(p, all_groups=True)

    p = sub.add_parser(
        "reset-offsets",
        help="reset a group's committed offsets (dry run unless --execute)",
        description="Reset the committed offsets of inactive groups. Prints the plan; commits it only with --execute.",
    )
    add_connection_arguments(p)
    _groups_arguments(p, all_groups=True)
    _topic_arguments(p, "reset")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    offset_reset.add_arguments(p, shift=True)

    p = sub.add_parser(
        "delete-offsets",
        help="delete a group's committed offsets of topics",
        description="Delete a consumer group's committed offsets of topics it is not subscribed to.",
    )
    add_connection_arguments(p)
    _groups_arguments(p, all_groups=False)
    _topic_arguments(p, "delete the offsets of")
    p.add_argument("--partition", type=int, action="append", default=[], help="only this partition (repeatable)")


def parse_topic(text: str) -> tuple[str, list[int] | None]:
    """Kafka's `--topic T` or `--topic T:0,1` -> (T, None) or (T, [0, 1]). Raises ValueError."""
    topic, sep, partitions = text.partition(":")
    if not topic:
        raise ValueError(f"--topic {text}: no topic name")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in partitions.split(",")})
    except ValueError:
        raise ValueError(f"--topic {text}: partitions must be numbers, as in {topic}:0,1") from None


async def _partitions_of(cluster: Cluster, topics: list[str], only: list[int] | None = None) -> list[tuple[str, int]]:
    """(topic, partition) for `--topic` values; a listed partition the topic lacks is an error."""
    found = []
    for text in topics:
        topic, listed = parse_topic(text)
        existing = sorted(await cluster.partitions(topic))
        wanted = listed if listed is not None else (only or existing)
        missing = [p for p in wanted if p not in existing]
        if missing:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic} has partitions 0..{len(existing) - 1}, not {', '.join(map(str, missing))}",
            )
        found += [(topic, p) for p in wanted]
    return found


async def _group_ids(cluster: Cluster, args) -> list[str]:
    """--group values, or every consumer group with --all-groups; raises ValueError for neither."""
    if getattr(args, "all_groups", False):
        if args.group:
            raise ValueError("--group and --all-groups: one of them")
        return sorted(x["group_id"] for x in await g.list_groups(cluster) if x["protocol_type"] in ("consumer", ""))
    if not args.group:
        raise ValueError(f"{args.action} needs --group" + (" or --all-groups" if hasattr(args, "all_groups") else ""))
    return args.group


def _partitions(assignment: dict[str, list[int]]) -> str:
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assignment.items())) or "-"


async def _describe(cluster: Cluster, group_id: str, args, out) -> int:
    group = await g.describe_group(cluster, group_id)
    if group["state"] == "Dead":
        print(f"Error: Consumer group '{group_id}' does not exist.", file=sys.stderr)
        return 1
    consumer = group["type"] == "consumer"
    if args.state:
        rows = [["GROUP", "TYPE", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]]
        rows[0] += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if consumer else []
        row = [group_id, group["type"], group["protocol_type"] or "-", group["protocol"] or "-", group["state"]]
        row.append(len(group["members"]))
        rows.append(row + ([group["group_epoch"], group["assignment_epoch"]] if consumer else []))
        write_table(rows, out)
        return 0
    if args.members:
        rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
        rows[0] += ["MEMBER-EPOCH", "TARGET-ASSIGNMENT"] if consumer else []
        for m in group["members"]:
            count = sum(len(ps) for ps in m["assignment"].values())
            row = [group_id, m["member_id"], m["client_host"], m["client_id"], count, _partitions(m["assignment"])]
            rows.append(row + ([m["member_epoch"], _partitions(m["target_assignment"])] if consumer else []))
        write_table(rows, out)
        return 0
    committed = await g.committed_offsets(cluster, group_id)
    owner = {}
    for m in group["members"]:
        for topic, parts in m["assignment"].items():
            for p in parts:
                owner[(topic, p)] = m
    rows = [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    ]
    shown = sorted(set(committed) | set(owner))
    # offsets of a deleted topic stay until they expire: they are shown without a log end
    existing = (await cluster.refresh_metadata(sorted({t for t, _ in shown}))).topics if shown else {}
    for topic, partition in shown:
        exists = partition in existing.get(topic, {})
        end: int | str = await list_offset(cluster, topic, partition, LATEST) if exists else "-"
        current = committed.get((topic, partition), -1)
        m = owner.get((topic, partition))
        rows.append(
            [
                group_id,
                topic,
                partition,
                current if current >= 0 else "-",
                end,
                end - current if current >= 0 and isinstance(end, int) else "-",
                m["member_id"] if m else "-",
                m["client_host"] if m else "-",
                m["client_id"] if m else "-",
            ]
        )
    if len(rows) == 1:
        out.write(f"Consumer group '{group_id}' has no active members and no committed offsets.\n")
    else:
        if not group["members"]:
            out.write(f"Consumer group '{group_id}' has no active members.\n\n")
        write_table(rows, out)
    return 0


async def _reset(cluster: Cluster, group_id: str, args, out) -> int:
    group = await g.describe_group(cluster, group_id)
    if group["state"] not in ("Empty", "Dead"):
        raise KafkaError(
            ErrorCode.NON_EMPTY_GROUP,
            f"assignments can only be reset if the group '{group_id}' is inactive, but the current state is {group['state']}",
        )
    committed = await g.committed_offsets(cluster, group_id)
    targets = sorted(committed) if args.all_topics else await _partitions_of(cluster, args.topic)
    plan = {}
    for topic, p in targets:
        plan[(topic, p)] = await offset_reset.new_offset(cluster, args, topic, p, committed.get((topic, p)))
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[group_id, t, p, o] for (t, p), o in plan.items()]
    write_table(rows, out)
    if args.execute:
        await g.commit_offsets(cluster, group_id, plan)
    else:
        out.write("(dry run: nothing committed; add --execute to commit)\n")
    return 0


def _filter(text: str | None, known: tuple[str, ...], what: str) -> set[str] | None:
    if not text:
        return None
    by_lower = {k.lower(): k for k in known}
    chosen = set()
    for item in text.split(","):
        if item.strip().lower() not in by_lower:
            raise ValueError(f"invalid {what} list '{text}': valid {what}s are {', '.join(known)}")
        chosen.add(by_lower[item.strip().lower()])
    return chosen


async def _list(cluster: Cluster, args, out) -> int:
    states, types = _filter(args.state, STATES, "state"), _filter(args.type, TYPES, "type")
    rows = [["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"]]
    for x in await g.list_groups(cluster):
        kind = x.get("group_type") or "classic"
        if (states is None or x["group_state"] in states) and (types is None or kind in types):
            rows.append([x["group_id"], kind, x["protocol_type"] or "-", x["group_state"]])
    write_table(rows, out)
    return 0


async def _run(args, out) -> int:
    if args.action == "reset-offsets":
        offset_reset.require_spec(args)
        if bool(args.topic) == args.all_topics:
            raise ValueError("reset-offsets needs --topic or --all-topics (one of them)")
    if args.action == "delete-offsets" and not args.topic:
        raise ValueError("delete-offsets needs --topic")
    for text in getattr(args, "topic", []):
        parse_topic(text)
    async with open_cluster(args) as cluster:
        if args.action == "list":
            return await _list(cluster, args, out)
        status = 0
        for group_id in await _group_ids(cluster, args):
            if args.action == "describe":
                status = max(status, await _describe(cluster, group_id, args, out))
            elif args.action == "delete":
                await g.delete_group(cluster, group_id)
                out.write(f"Deletion of requested consumer group ('{group_id}') was successful.\n")
            elif args.action == "reset-offsets":
                status = max(status, await _reset(cluster, group_id, args, out))
            else:
                await g.delete_offsets(cluster, group_id, await _partitions_of(cluster, args.topic, args.partition))
                out.write(f"Request succeeded for deleting offsets of group '{group_id}'.\n")
        return status


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("groups", _run, args, sys.stdout)
    return status or result
