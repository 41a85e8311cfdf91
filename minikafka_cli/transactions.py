"""`minikafka transactions`, like kafka-transactions.sh: `list` (every transactional id the
brokers coordinate), `describe --transactional-id ID` (its coordinator's view) and
`describe-producers --topic T --partition P` (the partition leader's producer state), and KIP-664's
`find-hanging` (`--broker-id B` or `--topic T [--partition P]`, `--max-transaction-timeout` ms) and
`abort` (`--topic T --partition P` with `--start-offset O`, or with `--producer-id`, `--producer-epoch`
and `--coordinator-epoch`), printed as tab-separated tables with Kafka's column names."""

from __future__ import annotations

import argparse
import sys
import time

from client.cluster import KafkaError
from client.transactions import (
    abort_transaction,
    describe_producers,
    describe_transaction,
    find_hanging,
    list_transactions,
)
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
    hanging = sub.add_parser("find-hanging", help="open transactions no coordinator will end (KIP-664)")
    where = hanging.add_mutually_exclusive_group(required=True)
    where.add_argument("--broker-id", type=int, help="every partition with a replica on this broker")
    where.add_argument("--topic")
    hanging.add_argument("--partition", type=int, help="with --topic: only this partition")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=900000,
        help="ms a transaction may stay open before it counts as hanging (default 900000, transaction.max.timeout.ms)",
    )
    abort = sub.add_parser("abort", help="abort one partition's open transaction with a marker (KIP-664)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument(
        "--start-offset", type=int, help="the open transaction's first offset (find-hanging's StartOffset)"
    )
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)


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
        elif args.action == "find-hanging":
            if args.partition is not None and args.topic is None:
                raise SystemExit("minikafka transactions find-hanging: --partition needs --topic")
            found = await find_hanging(
                cluster,
                topic=args.topic,
                partition=args.partition,
                broker_id=args.broker_id,
                max_transaction_timeout_ms=args.max_transaction_timeout,
                now_ms=int(time.time() * 1000),
            )
            _table(
                ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset"]
                + ["LastTimestamp", "Duration(min)"],
                [
                    [h["topic"], h["partition"], h["producer_id"], h["producer_epoch"], h["coordinator_epoch"]]
                    + [h["start_offset"], h["last_timestamp"], h["duration_ms"] // 60000]
                    for h in found
                ],
            )
        elif args.action == "abort":
            return await _abort(cluster, args)
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


async def _abort(cluster, args) -> int:
    """kafka-transactions.sh abort: by start offset (the producer is looked up in the partition's
    producer state) or by producer id, epoch and coordinator epoch."""
    if args.start_offset is not None:
        producers = await describe_producers(cluster, args.topic, args.partition)
        match = [p for p in producers if p["current_txn_start_offset"] == args.start_offset]
        if not match:
            print(
                f"minikafka transactions abort: no open transaction starts at offset {args.start_offset} "
                f"of {args.topic}-{args.partition}",
                file=sys.stderr,
            )
            return 1
        pid, epoch, coordinator_epoch = (
            match[0]["producer_id"],
            match[0]["producer_epoch"],
            max(match[0]["coordinator_epoch"], 0),
        )
    elif None not in (args.producer_id, args.producer_epoch, args.coordinator_epoch):
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        print(
            "minikafka transactions abort: give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch",
            file=sys.stderr,
        )
        return 2
    try:
        await abort_transaction(cluster, args.topic, args.partition, pid, epoch, coordinator_epoch)
    except KafkaError as e:
        print(f"minikafka transactions abort: {e}", file=sys.stderr)
        return 1
    print(f"aborted the transaction of producer {pid} (epoch {epoch}) on {args.topic}-{args.partition}")
    return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("transactions", _run, args)
    return status or result
