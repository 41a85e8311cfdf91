"""`minikafka consume` (Kafka's kafka-console-consumer.sh): print a topic's records (committed
data only: consumers read up to the HW).

With `--group G` it is a member of consumer group G: it reads the partitions the group assigns it,
from the group's committed offsets, and commits as it goes (`--group-protocol consumer`: KIP-848, the
broker assigns). With `--share-group G` it is a member of share group G (KIP-932, as Kafka's
`kafka-console-share-consumer.sh`): it prints the records the broker hands it and acknowledges each
as it prints it, ACCEPT unless its value is `--reject-on` (REJECT: never delivered again) or
`--release-on` (RELEASE: delivered again, perhaps to another member). Otherwise it starts where
`--offset` says (a number with `--partition`, `earliest`, or `latest`, the default), or at
`--from-beginning`, or at the first record at or after `--from-timestamp`; stops after
`--max-messages` records, or after `--timeout-ms` without a new record (otherwise it runs until
interrupted: Ctrl-C exits 130). Leader changes are followed (metadata refresh and retry).

Output is Kafka's DefaultMessageFormatter's (`message_formatter`): the value, optionally after
`CreateTime:MS`, `Partition:N`, `Offset:N`, headers and key, set by `--property print.key=true` and
its kin or by `--print-*`; or `--json` lines. Kafka's `--consumer-property` keys group.id,
isolation.level, auto.offset.reset and group.protocol are taken, and `--consumer.config` is
`--command-config`.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import dataclass

import trio

from client import KafkaError
from client.consumer_group_member import ConsumerGroupMember
from client.groups import GroupMember
from client.reads import EARLIEST, ISOLATION_LEVELS, LATEST, READ_COMMITTED, fetch, list_offset, reader_batches
from client.share_consumer import ACCEPT, REJECT, RELEASE, ShareMember
from minikafka_cli.common import add_connection_arguments, key_values, open_cluster, run_trio
from minikafka_cli.message_formatter import PROPERTIES as FORMATTER_PROPERTIES
from minikafka_cli.message_formatter import MessageFormatter
from minikafka_cli.offset_reset import timestamp_ms
from protocol import record_batch as rb
from protocol.errors import ErrorCode

#: `--consumer-property` keys (Kafka's consumer configs) this command takes
CONSUMER_PROPERTIES = ("group.id", "isolation.level", "auto.offset.reset", "group.protocol")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser, config_alias="--consumer.config")
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--group",
        help="consume as a member of this consumer group, committing its offsets (kafka-console-consumer --group)",
    )
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="with --group: the group protocol, classic (JoinGroup/SyncGroup, client-side assignors) or consumer "
        "(KIP-848: the broker assigns; group.protocol=consumer in Kafka 4 clients)",
    )
    parser.add_argument(
        "--assignor",
        action="append",
        choices=["range", "cooperative-sticky"],
        help="with --group: partition assignors in order of preference (repeatable; default range then "
        "cooperative-sticky, as Kafka's consumers)",
    )
    parser.add_argument(
        "--share-group",
        help="consume as a member of this share group (KIP-932), acknowledging each record as it is printed",
    )
    parser.add_argument("--reject-on", help="with --share-group: REJECT the records whose value is this text")
    parser.add_argument("--release-on", help="with --share-group: RELEASE the records whose value is this text")
    parser.add_argument(
        "--print-delivery-count", action="store_true", help="with --share-group: print each delivery's count"
    )
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (with --group: when nothing is committed)",
    )
    parser.add_argument("--partition", type=int, help="read only this partition")
    parser.add_argument(
        "--offset",
        help="where to start: an offset (needs --partition), earliest or latest (default latest, as Kafka's)",
    )
    parser.add_argument(
        "--from-timestamp",
        metavar="TIME",
        help="start at each partition's first record at or after TIME (ms since the epoch, or an ISO 8601 "
        "date-time such as 2026-11-29T10:00:00Z; a partition with none starts at its end)",
    )
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument(
        "--isolation-level",
        choices=sorted(ISOLATION_LEVELS),
        default="read_uncommitted",
        help="read_committed: only committed transactions, up to the last stable offset",
    )
    parser.add_argument("--timeout-ms", type=int, help="exit after this long (ms) without a record")
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="how records are printed, as Kafka's console consumer: " + ", ".join(FORMATTER_PROPERTIES),
    )
    parser.add_argument(
        "--consumer-property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a consumer config: " + ", ".join(CONSUMER_PROPERTIES) + " (repeatable)",
    )
    parser.add_argument("--print-key", action="store_true", help="print each key (print.key=true)")
    parser.add_argument("--print-partition", action="store_true", help="print Partition:N (print.partition=true)")
    parser.add_argument("--print-offset", action="store_true", help="print Offset:N (print.offset=true)")
    parser.add_argument(
        "--print-timestamp", action="store_true", help="print CreateTime:MS or LogAppendTime:MS (print.timestamp=true)"
    )
    parser.add_argument(
        "--print-headers", action="store_true", help="print k:v,k2:v2 or NO_HEADERS (print.headers=true)"
    )
    parser.add_argument("--key-separator", default="\t", help="between printed fields (default TAB; key.separator)")
    parser.add_argument("--json", action="store_true", help="one JSON object per record")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _format(args, partition: int, record: rb.Record, log_append_time: bool = False, delivery_count=None) -> str:
    """One record's output, its line end included: a JSON object with --json, else as Kafka's
    DefaultMessageFormatter (`args.formatter`)."""
    if args.json:

        def enc(b):
            if b is None:
                return None
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                return {"base64": base64.b64encode(b).decode()}

        return (
            json.dumps(
                {
                    "partition": partition,
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": enc(record.key),
                    "value": enc(record.value),
                    "headers": {h.key: enc(h.value) for h in record.headers},
                }
            )
            + "\n"
        )
    return args.formatter.format(
        partition,
        record.offset,
        record.timestamp,
        record.key,
        record.value,
        record.headers,
        log_append_time=log_append_time,
        delivery_count=delivery_count,
    )


async def _poll(cluster, args, partitions, positions: dict[int, int], out, limit: int | None) -> int:
    """One fetch round over `partitions` from `positions` (advanced in place); prints at most
    `limit` records and returns how many it printed."""
    printed = 0
    for p in partitions:
        level = ISOLATION_LEVELS[args.isolation_level]
        fetched = await fetch(
            cluster, args.topic, p, positions[p], max_wait_ms=200, max_bytes=1 << 20, isolation_level=level
        )
        data = fetched.records
        for pos, header, visible in reader_batches(data, fetched.aborted if level == READ_COMMITTED else None):
            for record in rb.decode_records(data, pos, header) if visible else ():
                if record.offset < positions[p]:
                    continue
                out.write(_format(args, p, record, header.is_log_append_time))
                positions[p] = record.offset + 1
                printed += 1
                if limit is not None and printed >= limit:
                    out.flush()
                    return printed
            positions[p] = max(positions[p], header.next_offset)
    out.flush()
    return printed


class _Idle:
    """--timeout-ms: the deadline moves with every record."""

    def __init__(self, timeout_ms: int | None):
        self.timeout_ms = timeout_ms
        self.deadline = None if timeout_ms is None else trio.current_time() + timeout_ms / 1000

    def progress(self) -> None:
        if self.timeout_ms is not None:
            self.deadline = trio.current_time() + self.timeout_ms / 1000

    def expired(self) -> bool:
        return self.deadline is not None and trio.current_time() >= self.deadline


def _left(args, printed: int) -> int | None:
    return None if args.max_messages is None else args.max_messages - printed


async def _consume(args, out) -> int:
    async with open_cluster(args) as cluster:
        await cluster.partition_info(args.topic, 0, refresh=True)
        if args.group:
            return await _consume_in_group(cluster, args, out)
        if args.share_group:
            return await _consume_in_share_group(cluster, args, out)
        partitions = sorted(cluster.metadata.topics[args.topic])
        if args.partition is not None:
            if args.partition not in partitions:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{args.topic}-{args.partition}")
            partitions = [args.partition]
        positions = {p: await _start(cluster, args, p) for p in partitions}
        printed, idle = 0, _Idle(args.timeout_ms)
        while True:
            n = await _poll(cluster, args, partitions, positions, out, _left(args, printed))
            printed += n
            if n:
                idle.progress()
            if _left(args, printed) == 0 or idle.expired():
                return printed


async def _start(cluster, args, partition: int) -> int:
    """Where reading `partition` starts: --offset N, or ListOffsets for earliest / latest /
    --from-timestamp (a timestamp after the last record starts at the end)."""
    level = ISOLATION_LEVELS[args.isolation_level]
    if isinstance(args.start, FromTimestamp):
        found = await list_offset(cluster, args.topic, partition, args.start.ms, level)
        return found if found >= 0 else await list_offset(cluster, args.topic, partition, LATEST, level)
    if args.start >= 0:
        return args.start
    return await list_offset(cluster, args.topic, partition, args.start, level)


async def _consume_in_group(cluster, args, out) -> int:
    """As `kafka-console-consumer --group`: join the group, read the assigned partitions from the
    group's committed offsets (else the earliest with --from-beginning, the latest without),
    commit after every round that printed records, heartbeat every second, rejoin when the group
    rebalances, and commit and leave on the way out."""
    member: GroupMember | ConsumerGroupMember
    if args.group_protocol == "consumer":
        member = ConsumerGroupMember(cluster, args.group, [args.topic], client_id="minikafka-console-consumer")
    else:
        member = GroupMember(
            cluster, args.group, [args.topic], client_id="minikafka-console-consumer", assignors=tuple(args.assignor)
        )
    printed, idle = 0, _Idle(args.timeout_ms)
    positions: dict[int, int] = {}
    try:
        while True:
            await member.join()
            if member.rejoin_needed:  # cooperative: revoked partitions go to their new owner next
                continue
            positions = await member.starting_positions(args.topic, EARLIEST if args.start == EARLIEST else LATEST)
            interval_s = getattr(member, "heartbeat_interval_s", 1.0)
            next_heartbeat = trio.current_time() + interval_s
            while True:
                if not positions:
                    await trio.sleep(0.2)
                n = await _poll(cluster, args, sorted(positions), positions, out, _left(args, printed))
                printed += n
                if n:
                    idle.progress()
                    if not await member.commit({(args.topic, p): o for p, o in positions.items()}):
                        break
                if _left(args, printed) == 0 or idle.expired():
                    return printed
                if trio.current_time() >= next_heartbeat:
                    if not await member.heartbeat():
                        break
                    next_heartbeat = trio.current_time() + interval_s
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            try:
                await member.commit({(args.topic, p): o for p, o in positions.items()})
            except Exception:
                pass  # rebalanced meanwhile: the new owner starts from the last commit
            await member.leave()


async def _consume_in_share_group(cluster, args, out) -> int:
    """As `kafka-console-share-consumer --group`: print and acknowledge each record the share
    group hands this member; on the way out release what was not printed, close the share
    sessions and leave."""
    member = ShareMember(cluster, args.share_group, [args.topic], client_id="minikafka-console-share-consumer")
    printed, idle = 0, _Idle(args.timeout_ms)
    try:
        while True:
            for delivered in await member.poll(max_records=500):  # as max.poll.records: the rest is released
                if _left(args, printed) == 0:
                    break  # not printed: released by close()
                out.write(_format(args, delivered.partition, delivered.record, delivery_count=delivered.delivery_count))
                value = _text(delivered.record.value)
                kind = REJECT if value == args.reject_on else RELEASE if value == args.release_on else ACCEPT
                member.acknowledge(delivered, kind)
                printed += 1
                idle.progress()
            out.flush()
            if _left(args, printed) == 0 or idle.expired():
                return printed
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await member.close()


@dataclass(frozen=True)
class FromTimestamp:
    """Start at the first record at or after `ms` (ListOffsets by timestamp)."""

    ms: int


def resolve(args: argparse.Namespace) -> None:
    """Fold Kafka's spellings into `args`: `--property` into `args.formatter`, `--consumer-property`
    into the options, and the start (--offset, --from-beginning, --from-timestamp) into
    `args.start`: an offset >= 0, EARLIEST, LATEST, or a `FromTimestamp`. Raises ValueError naming
    the option for anything a user could mistype (exit 2)."""
    for key, value in key_values(args.consumer_property, "--consumer-property").items():
        if key == "group.id":
            args.group = value
        elif key == "isolation.level":
            if value not in ISOLATION_LEVELS:
                raise ValueError(f"--consumer-property isolation.level={value}: expected {', '.join(ISOLATION_LEVELS)}")
            args.isolation_level = value
        elif key == "auto.offset.reset":
            if value not in ("earliest", "latest"):
                raise ValueError(f"--consumer-property auto.offset.reset={value}: expected earliest or latest")
            args.from_beginning = value == "earliest"
        elif key == "group.protocol":
            if value not in ("classic", "consumer"):
                raise ValueError(f"--consumer-property group.protocol={value}: expected classic or consumer")
            args.group_protocol = value
        else:
            raise ValueError(f"unknown --consumer-property {key} (known: {', '.join(CONSUMER_PROPERTIES)})")
    args.formatter = MessageFormatter.from_properties(
        key_values(args.property, "--property"),
        print_key=args.print_key,
        print_partition=args.print_partition,
        print_offset=args.print_offset,
        print_timestamp=args.print_timestamp,
        print_headers=args.print_headers,
        print_delivery=args.print_delivery_count,
        key_separator=args.key_separator,
    )
    starts = [o for o, given in (("--offset", args.offset), ("--from-timestamp", args.from_timestamp)) if given]
    if args.from_beginning and args.offset is None and args.from_timestamp is None:
        args.start = EARLIEST
    elif len(starts) > 1 or (starts and args.from_beginning and args.offset != "earliest"):
        raise ValueError("--from-beginning, --offset and --from-timestamp each say where to start: one of them")
    elif args.from_timestamp is not None:
        args.start = FromTimestamp(timestamp_ms(args.from_timestamp, "--from-timestamp", epoch_ms=True))
    elif args.offset is None or args.offset in ("latest", "earliest"):
        args.start = EARLIEST if args.offset == "earliest" else LATEST
    elif args.offset.isdigit():
        if args.partition is None:
            raise ValueError("--offset N needs --partition (earliest and latest do not)")
        args.start = int(args.offset)
    else:
        raise ValueError(f"--offset {args.offset}: expected a number >= 0, earliest or latest")


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.assignor is not None and args.group_protocol == "consumer":
        return "--assignor is for the classic protocol (the broker assigns)"
    if args.group is not None and (args.partition is not None or isinstance(args.start, int) and args.start >= 0):
        return "--group reads the partitions the group assigns: no --partition/--offset N"
    if args.group is not None and args.from_timestamp is not None:
        return "--group starts at the group's committed offsets: no --from-timestamp"
    if args.share_group is not None:
        if args.group is not None:
            return "--group and --share-group are different kinds of groups: one of them"
        if args.partition is not None or args.offset is not None or args.from_beginning or args.from_timestamp:
            return (
                "--share-group reads what the broker hands out (where share.auto.offset.reset says): "
                "no --partition/--offset/--from-beginning/--from-timestamp"
            )
        if args.isolation_level != "read_uncommitted":
            return "--share-group: the group's share.isolation.level config decides the isolation level"
    elif args.reject_on is not None or args.release_on is not None or args.print_delivery_count:
        return "--reject-on, --release-on and --print-delivery-count need --share-group"
    return None


def run(args: argparse.Namespace) -> int:
    try:
        resolve(args)
    except ValueError as e:
        print(f"minikafka consume: {e}", file=sys.stderr)
        return 2
    problem = _usage_error(args)
    if problem is not None:
        print(f"minikafka consume: {problem}", file=sys.stderr)
        return 2
    if args.assignor is None:
        args.assignor = ["range", "cooperative-sticky"]
    try:
        status, printed = run_trio("consume", _consume, args, sys.stdout)
    except KeyboardInterrupt:
        return 130
    if status:
        return status
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return 0
