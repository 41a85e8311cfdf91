"""`minikafka delete-records`, like kafka-delete-records.sh: `--offset-json-file F` with Kafka's
JSON (`{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}`; offset -1 means
the high watermark), or `--topic T --partition P --offset O`. Each partition's log start offset (low
watermark) moves to the offset on every replica; prints the new low watermarks."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from client.admin import delete_records
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--offset-json-file", type=Path, help="Kafka's JSON: the partitions and offsets")
    parser.add_argument("--topic", help="instead of the file: one topic ...")
    parser.add_argument("--partition", type=int, help="... one partition ...")
    parser.add_argument("--offset", type=int, help="... delete the records below this offset (-1: the high watermark)")


def read_offsets(args) -> dict[tuple[str, int], int]:
    """The partitions and offsets asked for; raises ValueError with what is wrong."""
    simple = (args.topic, args.partition, args.offset)
    if args.offset_json_file is not None:
        if any(v is not None for v in simple):
            raise ValueError("use either --offset-json-file or --topic/--partition/--offset")
        try:
            body = json.loads(args.offset_json_file.read_text())
            return {(str(p["topic"]), int(p["partition"])): int(p["offset"]) for p in body["partitions"]}
        except OSError as e:
            raise ValueError(f"cannot read {args.offset_json_file}: {e.strerror}") from None
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{args.offset_json_file} is not Kafka's offset JSON: {e}") from None
    if any(v is None for v in simple):
        raise ValueError("needs --offset-json-file, or all of --topic, --partition and --offset")
    return {(args.topic, args.partition): args.offset}


async def _run(args) -> int:
    offsets = read_offsets(args)
    async with open_cluster(args) as cluster:
        results = await delete_records(cluster, offsets)
    print("Records delete operation completed:")
    status = 0
    for (topic, partition), (low, code) in sorted(results.items()):
        if code == ErrorCode.NONE:
            print(f"partition: {topic}-{partition}\tlow_watermark: {low}")
        else:
            print(f"partition: {topic}-{partition}\terror: {ErrorCode(code).name}", file=sys.stderr)
            status = 1
    return status


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("delete-records", _run, args)
    return status or result
