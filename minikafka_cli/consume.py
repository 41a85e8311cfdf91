"""`minikafka consume`: print a topic's records (committed data only: consumers read up to the HW).

Starts at the latest offset unless `--from-beginning` or `--offset` (with `--partition`); stops after
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

from client import Cluster, KafkaError
from client.reads import EARLIEST, LATEST, fetch_records, list_offset
from minikafka_cli.common import run_trio
from protocol import record_batch as rb
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    parser.add_argument("--partition", type=int, help="read only this partition")
    parser.add_argument("--offset", type=int, help="start at this offset (needs --partition)")
    parser.add_argument("--max-messages", type=int, help="exit after this many records")
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


async def _consume(args, out) -> int:
    printed = 0
    async with Cluster.open(args.bootstrap_server) as cluster:
        await cluster.partition_info(args.topic, 0, refresh=True)
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
                else await list_offset(cluster, args.topic, p, EARLIEST if args.from_beginning else LATEST)
            )
        idle_deadline = None if args.timeout_ms is None else trio.current_time() + args.timeout_ms / 1000
        while True:
            got_any = False
            for p in partitions:
                data = await fetch_records(cluster, args.topic, p, positions[p], max_wait_ms=200, max_bytes=1 << 20)
                for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                    for record in rb.decode_records(data, pos, header):
                        if record.offset < positions[p]:
                            continue
                        out.write(_format(args, p, record) + "\n")
                        positions[p] = record.offset + 1
                        printed += 1
                        got_any = True
                        if args.max_messages is not None and printed >= args.max_messages:
                            out.flush()
                            return printed
                    positions[p] = max(positions[p], header.next_offset)
            out.flush()
            if got_any and args.timeout_ms is not None:
                idle_deadline = trio.current_time() + args.timeout_ms / 1000
            if idle_deadline is not None and trio.current_time() >= idle_deadline:
                return printed


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        print("minikafka consume: --offset needs --partition", file=sys.stderr)
        return 2
    try:
        status, printed = run_trio("consume", _consume, args, sys.stdout)
    except KeyboardInterrupt:
        return 130
    if status:
        return status
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return 0
