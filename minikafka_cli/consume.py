"""`minikafka consume`: print a topic's records (committed data only: consumers read up to the HW).

With `--group G` it is a member of consumer group G: it reads the partitions the group assigns it,
from the group's committed offsets, and commits as it goes (`--group-protocol consumer`: KIP-848, the
broker assigns). With `--share-group G` it is a member of share group G (KIP-932, as Kafka's
`kafka-console-share-consumer.sh`): it prints the records the broker hands it and acknowledges each
as it prints it, ACCEPT unless its value is `--reject-on` (REJECT: never delivered again) or
`--release-on` (RELEASE: delivered again, perhaps to another member). Otherwise it starts at the latest offset unless `--from-beginning` or `--offset` (with `--partition`); stops after
`--max-messages` records, or after `--timeout-ms` without a new record (otherwise it runs until
interrupted). Leader changes are followed (metadata refresh and retry). One line per record: the
value, optionally prefixed by offset, timestamp, key and headers, or `--json` lines.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys

import trio

from client import KafkaError
from client.consumer_group_member import ConsumerGroupMember
from client.groups import GroupMember
from client.reads import EARLIEST, ISOLATION_LEVELS, LATEST, READ_COMMITTED, fetch, list_offset, reader_batches
from client.share_consumer import ACCEPT, REJECT, RELEASE, ShareMember
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol import record_batch as rb
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
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
    parser.add_argument("--offset", type=int, help="start at this offset (needs --partition)")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
    parser.add_argument(
        "--isolation-level",
        choices=sorted(ISOLATION_LEVELS),
        default="read_uncommitted",
        help="read_committed: only committed transactions, up to the last stable offset",
    )
    parser.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    parser.add_argument("--print-key", action="store_true")
    parser.add_argument("--print-offset", action="store_true")
    parser.add_argument("--print-timestamp", action="store_true")
    parser.add_argument("--print-headers", action="store_true")
    parser.add_argument("--key-separator", default="\t", help="between printed fields (default TAB)")
    parser.add_argument("--json", action="store_true", help="one JSON object per record")


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _format(args, partition: int, record: rb.Record) -> str:
    if args.json:

        def enc(b):
            if b is None:
                return None
            try:
                return b.decode("utf-8")
            except UnicodeDecodeError:
                return {"base64": base64.b64encode(b).decode()}

        return json.dumps(
            {
                "partition": partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": enc(record.key),
                "value": enc(record.value),
                "headers": {h.key: enc(h.value) for h in record.headers},
            }
        )
    fields = []
    if args.print_offset:
        fields.append(f"{partition}:{record.offset}")
    if args.print_timestamp:
        fields.append(str(record.timestamp))
    if args.print_key:
        fields.append(_text(record.key) or "null")
    if args.print_headers:
        fields.append(",".join(f"{h.key}={_text(h.value)}" for h in record.headers) or "NO_HEADERS")
    fields.append(_text(record.value) or "null")
    return args.key_separator.join(fields)


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
                out.write(_format(args, p, record) + "\n")
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
        positions = {}
        for p in partitions:
            positions[p] = (
                args.offset
                if args.offset is not None
                else await list_offset(
                    cluster,
                    args.topic,
                    p,
                    EARLIEST if args.from_beginning else LATEST,
                    ISOLATION_LEVELS[args.isolation_level],
                )
            )
        printed, idle = 0, _Idle(args.timeout_ms)
        while True:
            n = await _poll(cluster, args, partitions, positions, out, _left(args, printed))
            printed += n
            if n:
                idle.progress()
            if _left(args, printed) == 0 or idle.expired():
                return printed


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
            positions = await member.starting_positions(args.topic, EARLIEST if args.from_beginning else LATEST)
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
                line = _format(args, delivered.partition, delivered.record)
                if args.print_delivery_count:
                    line = f"{delivered.delivery_count}{args.key_separator}{line}"
                out.write(line + "\n")
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


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.offset is not None and args.partition is None:
        return "--offset needs --partition"
    if args.assignor is not None and args.group_protocol == "consumer":
        return "--assignor is for the classic protocol (the broker assigns)"
    if args.group is not None and (args.partition is not None or args.offset is not None):
        return "--group reads the partitions the group assigns: no --partition/--offset"
    if args.share_group is not None:
        if args.group is not None:
            return "--group and --share-group are different kinds of groups: one of them"
        if args.partition is not None or args.offset is not None or args.from_beginning:
            return (
                "--share-group reads what the broker hands out (where share.auto.offset.reset says): "
                "no --partition/--offset/--from-beginning"
            )
        if args.isolation_level != "read_uncommitted":
            return "--share-group: the group's share.isolation.level config decides the isolation level"
    elif args.reject_on is not None or args.release_on is not None or args.print_delivery_count:
        return "--reject-on, --release-on and --print-delivery-count need --share-group"
    return None


def run(args: argparse.Namespace) -> int:
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
