"""`minikafka leader-election --election-type PREFERRED|UNCLEAN [--topic T [--partition P]]`
(`--preferred` is short for the first): through the active controller (ElectLeaders), as
kafka-leader-election.sh does. PREFERRED moves leadership back to each partition's first assigned
replica where it is in sync; UNCLEAN gives a partition with no live leader the first live replica,
even one outside the ISR (records only the lost ISR held are gone)."""

from __future__ import annotations

import argparse
import sys

from client import KafkaError
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument(
        "--election-type",
        type=str.upper,
        choices=["PREFERRED", "UNCLEAN"],
        help="PREFERRED: each partition's first replica; UNCLEAN: any live replica where no leader is live",
    )
    kind.add_argument("--preferred", action="store_true", help="the same as --election-type PREFERRED")
    parser.add_argument("--topic", help="only this topic (default: every partition)")
    parser.add_argument("--partition", type=int, help="only this partition of --topic")


async def _run(args) -> int:
    election_type = 1 if args.election_type == "UNCLEAN" else 0
    async with open_cluster(args) as cluster:
        partitions = None
        if args.topic:
            await cluster.partition_info(args.topic, 0, refresh=True)
            indexes = [args.partition] if args.partition is not None else sorted(cluster.metadata.topics[args.topic])
            partitions = [{"topic": args.topic, "partitions": indexes}]

        async def attempt(refresh):
            md = await cluster.refresh_metadata([])
            conn = await cluster.broker_connection(md.controller_id)
            r = await conn.request(
                ApiKey.ELECT_LEADERS,
                {"election_type": election_type, "topic_partitions": partitions, "timeout_ms": 30000},
            )
            if r.get("error_code", 0) == ErrorCode.NOT_CONTROLLER:
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
            return r

        response = await cluster.retry(attempt, "ElectLeaders")
    status = 0
    for topic in response.replica_election_results:
        for p in topic.partition_result:
            code = ErrorCode(p.error_code)
            if code == ErrorCode.NONE:
                print(f"Successfully completed leader election for partition {topic.topic}-{p.partition_id}")
            elif code == ErrorCode.ELECTION_NOT_NEEDED:
                print(f"Valid replica already elected for partition {topic.topic}-{p.partition_id}")
            else:
                print(f"Election failed for partition {topic.topic}-{p.partition_id}: {code.name}", file=sys.stderr)
                status = 1
    return status


def run(args: argparse.Namespace) -> int:
    if args.partition is not None and not args.topic:
        print("minikafka leader-election: --partition needs --topic", file=sys.stderr)
        return 2
    status, result = run_trio("leader-election", _run, args)
    return status or result
