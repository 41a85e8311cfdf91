"""`minikafka log-dirs --describe`, like kafka-log-dirs.sh: every log dir of each broker (or of
`--broker-list`) with the partitions it holds (of `--topic-list`, or all), printed as Kafka's
JSON: `{"brokers": [{"broker": 1, "logDirs": [{"logDir": ..., "error": null, "partitions":
[{"partition": "t-0", "size": 123, "offsetLag": 0, "isFuture": false}]}]}], "version": 1}`."""

from __future__ import annotations

import argparse
import json

from client.admin import describe_log_dirs
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--describe", action="store_true", required=True, help="describe the log dirs")
    parser.add_argument("--broker-list", help="broker ids, comma separated (default: all)")
    parser.add_argument("--topic-list", help="topics, comma separated (default: all)")


async def _run(args) -> int:
    async with open_cluster(args) as cluster:
        md = await cluster.refresh_metadata([])
        try:
            ids = sorted(md.brokers) if not args.broker_list else [int(b) for b in args.broker_list.split(",")]
        except ValueError:
            raise ValueError(f"--broker-list {args.broker_list!r} is not a list of broker ids") from None
        topics = None if not args.topic_list else [t.strip() for t in args.topic_list.split(",") if t.strip()]
        print("Querying brokers for log directories information")
        brokers = []
        for broker_id in ids:
            dirs = []
            for result in await describe_log_dirs(cluster, broker_id, topics):
                dirs.append(
                    {
                        "logDir": result.log_dir,
                        "error": None if result.error_code == ErrorCode.NONE else ErrorCode(result.error_code).name,
                        "partitions": [
                            {
                                "partition": f"{t.name}-{p.partition_index}",
                                "size": p.partition_size,
                                "offsetLag": p.offset_lag,
                                "isFuture": p.is_future_key,
                            }
                            for t in result.topics
                            for p in t.partitions
                        ],
                    }
                )
            brokers.append({"broker": broker_id, "logDirs": dirs})
        print(f"Received log directory information from brokers {','.join(map(str, ids))}")
        print(json.dumps({"brokers": brokers, "version": 1}))
    return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("log-dirs", _run, args)
    return status or result
