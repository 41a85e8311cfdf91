"""`minikafka produce`: records from stdin or a file, one per line, to a topic.

Idempotent by default (the producer of `client/producer.py`: a producer id, sequences, acks=all);
`--no-idempotence` turns it off. Prints how many records were acknowledged; the exit status is 1 if
any record failed and 2 for bad arguments. Errors are one line, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from client.producer import Producer
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol import record_batch as rb

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--file", type=argparse.FileType("rb"), help="read records from this file (default: stdin)")
    parser.add_argument("--partition", type=int, help="send every record to this partition")
    parser.add_argument("--key-separator", help="split each line into key and value at the first SEP")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="add this header to every record (repeatable)",
    )
    parser.add_argument("--acks", choices=sorted(ACKS), default="all", help="0, 1 or all (default all)")
    parser.add_argument("--compression", choices=sorted(rb.CODECS), default="none")
    parser.add_argument("--linger-ms", type=int, default=5, help="wait this long to fill a batch (default 5)")
    parser.add_argument("--batch-size", type=int, default=16384, help="bytes per batch (default 16384)")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=5,
        choices=range(1, 6),
        metavar="1..5",
        help="batches in flight per partition (default 5)",
    )
    parser.add_argument(
        "--no-idempotence", action="store_true", help="do not use an idempotent producer (retries may then duplicate)"
    )


def _records(stream, key_separator: str | None):
    for line in stream:
        line = line.rstrip(b"\r\n")
        if key_separator is not None:
            key, sep, value = line.partition(key_separator.encode())
            yield (key, value) if sep else (None, line)
        else:
            yield None, line


async def _produce(args, headers) -> tuple[int, int]:
    acks = ACKS[args.acks]
    idempotent = not args.no_idempotence
    if idempotent and acks != -1:
        raise ValueError("--acks 0 or 1 needs --no-idempotence (an idempotent producer uses acks=all)")
    stream = args.file or sys.stdin.buffer
    progress = tqdm(unit=" records", disable=args.file is None or not sys.stderr.isatty(), file=sys.stderr)
    ok = failed = 0
    async with open_cluster(args) as cluster:
        async with Producer.open(
            cluster,
            acks=acks,
            idempotent=idempotent,
            max_in_flight=args.max_in_flight,
            linger_ms=args.linger_ms,
            batch_size=args.batch_size,
            compression=rb.CODECS[args.compression],
        ) as producer:
            deliveries = []
            for key, value in _records(stream, args.key_separator):
                deliveries.append(
                    await producer.send(args.topic, value, key=key, headers=headers, partition=args.partition)
                )
                progress.update(1)
            await producer.flush()
    progress.close()
    for delivery in deliveries:
        if delivery.error is None:
            ok += 1
        else:
            failed += 1
            if failed <= 3:
                print(f"minikafka produce: a record failed: {delivery.error}", file=sys.stderr)
    return ok, failed


def run(args: argparse.Namespace) -> int:
    headers = []
    for item in args.header:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"minikafka produce: --header {item!r} is not KEY=VALUE", file=sys.stderr)
            return 2
        headers.append((key, value.encode()))
    status, counts = run_trio("produce", _produce, args, headers)
    if status:
        return status
    ok, failed = counts
    print(f"{ok} records acknowledged" + (f", {failed} failed" if failed else ""))
    return 1 if failed else 0
