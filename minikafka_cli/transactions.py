"""`minikafka transactions`, like kafka-transactions.sh: `list` (every transactional id the
brokers coordinate), `describe --transactional-id ID` (its coordinator's view) and
`describe-producers --topic T --partition P` (the partition leader's producer state), printed as
tab-separated tables with Kafka's column names."""

from __future__ import annotations

import argparse
import time

from client.transactions import describe_producers, describe_transaction, list_transactions
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="list the transactional ids")
    describe = sub.add_parser("describe", help="describe one transactional id")
    describe.add_argument("--transactional-id", required=True)
    producers = sub.add_parser("describe-producers", help="the active producers of a partition")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)


def _table(header: list[str], rows: list[list]) -> None:
    print("\t".join(header))
    for row in rows:
        print("\t".join(str(v) for v in row))


async def _run(args) -> int:
    async with open_cluster(args) as cluster:
        if args.action == "list":
            found = await list_transactions(cluster)
            _table(
                ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                [
                    [t["transactional_id"], t["coordinator"], t["producer_id"], t["transaction_state"]]
                    for t in sorted(found, key=lambda t: t["transactional_id"])
                ],
            )
        elif args.action == "describe":
            t = await describe_transaction(cluster, args.transactional_id)
            start = t["transaction_start_time_ms"]
            duration = int(time.time() * 1000) - start if start >= 0 else -1
            _table(
                [
                    "CoordinatorId",
                    "TransactionalId",
                    "ProducerId",
                    "ProducerEpoch",
                    "TransactionState",
                    "TransactionTimeoutMs",
                    "CurrentTransactionStartTimeMs",
                    "TransactionDurationMs",
                    "TopicPartitions",
                ],
                [
                    [
                        t["coordinator"],
                        t["transactional_id"],
                        t["producer_id"],
                        t["producer_epoch"],
                        t["transaction_state"],
                        t["transaction_timeout_ms"],
                        start if start >= 0 else "None",
                        duration if duration >= 0 else "None",
                        ",".join(f"{topic}-{p}" for topic, p in t["partitions"]),
                    ]
                ],
            )
        else:
            producers = await describe_producers(cluster, args.topic, args.partition)
            _table(
                [
                    "ProducerId",
                    "ProducerEpoch",
                    "LatestCoordinatorEpoch",
                    "LastSequence",
                    "LastTimestamp",
                    "CurrentTransactionStartOffset",
                ],
                [
                    [
                        p["producer_id"],
                        p["producer_epoch"],
                        p["coordinator_epoch"],
                        p["last_sequence"],
                        p["last_timestamp"],
                        p["current_txn_start_offset"] if p["current_txn_start_offset"] >= 0 else "None",
                    ]
                    for p in producers
                ],
            )
    return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("transactions", _run, args)
    return status or result
