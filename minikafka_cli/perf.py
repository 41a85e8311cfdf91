"""`minikafka perf produce|consume|end-to-end`: Kafka's perf tools for a minikafka cluster.

Like `kafka-producer-perf-test`, `kafka-consumer-perf-test` and `EndToEndLatency`: prints one
result line (records/s, MB/s, latency avg/p50/p95/p99/max in ms), or with `--json` one JSON object
(what `make bench` reads). `--client ours` drives our trio client; `--client confluent` drives
confluent-kafka (librdkafka), which can generate far more load than a Python client.
Exit status: 0, 1 when records failed or the cluster is unreachable, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import functools
import sys

from minikafka_cli.common import run_trio
from minikafka_cli.perf_tools import ours
from minikafka_cli.perf_tools.stats import Result
from protocol import record_batch as rb

ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="perf_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    common.add_argument("--topic", required=True)
    common.add_argument("--num-records", type=_positive, required=True)
    common.add_argument(
        "--client", choices=["ours", "confluent"], default="ours", help="our trio client (default) or confluent-kafka"
    )
    common.add_argument("--json", action="store_true", help="print the result as one JSON object")

    p = sub.add_parser("produce", parents=[common], help="producer throughput and latency")
    p.add_argument("--record-size", type=_positive, default=100, help="bytes per record value (default 100)")
    p.add_argument("--throughput", type=float, default=-1, help="cap in records/s (default -1: no cap)")
    p.add_argument("--acks", choices=sorted(ACKS), default="all")
    p.add_argument("--batch-size", type=_positive, help="bytes per batch (default: the client's own)")
    p.add_argument("--linger-ms", type=int, help="batching delay (default: the client's own)")
    p.add_argument("--compression", choices=sorted(rb.CODECS), default="none")
    p.add_argument("--idempotence", action="store_true", help="idempotent producer (needs --acks all)")

    c = sub.add_parser("consume", parents=[common], help="consumer throughput from the log start")
    c.add_argument(
        "--fetch-max-bytes",
        type=_positive,
        default=None,
        help="bytes per fetch (default: 1 MiB per partition ours, 50 MiB confluent)",
    )
    c.add_argument("--timeout", type=float, default=120, help="give up after this many seconds")

    e = sub.add_parser("end-to-end", parents=[common], help="produce-to-consume latency at a paced rate")
    e.add_argument("--throughput", type=float, default=1000, help="records/s (default 1000)")
    e.add_argument("--record-size", type=_positive, default=100)
    e.add_argument("--acks", choices=sorted(ACKS), default="all")
    e.add_argument(
        "--partition", type=int, help="produce to and read this partition only (default: every partition, spread)"
    )
    e.add_argument("--linger-ms", type=int, help="producer batching delay (default: the client's own)")
    e.add_argument("--timeout", type=float, default=120)
    e.add_argument(
        "--producer-process",
        action="store_true",
        help="produce from a child process of its own (--client confluent; default: one loop does both)",
    )


def _check(args) -> str | None:
    if args.perf_command == "produce" and args.idempotence and ACKS[args.acks] != -1:
        return "--idempotence needs --acks all"
    if args.perf_command == "end-to-end" and args.record_size < 8:
        return "--record-size must be at least 8 (each record carries its send time)"
    if args.perf_command == "end-to-end" and args.producer_process and args.client != "confluent":
        return "--producer-process needs --client confluent"
    return None


def _confluent(args) -> Result:
    from minikafka_cli.perf_tools import confluent

    if args.perf_command == "produce":
        return confluent.produce(
            args.bootstrap_server,
            args.topic,
            num_records=args.num_records,
            record_size=args.record_size,
            throughput=args.throughput,
            acks=ACKS[args.acks],
            batch_size=args.batch_size,
            linger_ms=args.linger_ms,
            compression=args.compression,
            idempotence=args.idempotence,
        )
    if args.perf_command == "consume":
        return confluent.consume(
            args.bootstrap_server,
            args.topic,
            num_records=args.num_records,
            fetch_max_bytes=args.fetch_max_bytes or 52428800,
            timeout_s=args.timeout,
        )
    return confluent.end_to_end(
        args.bootstrap_server,
        args.topic,
        num_records=args.num_records,
        throughput=args.throughput,
        record_size=args.record_size,
        acks=ACKS[args.acks],
        partition=args.partition,
        linger_ms=args.linger_ms,
        timeout_s=args.timeout,
        producer_process=args.producer_process,
    )


def _ours(args):
    if args.perf_command == "produce":
        optional = {k: v for k, v in (("batch_size", args.batch_size), ("linger_ms", args.linger_ms)) if v is not None}
        return functools.partial(
            ours.produce,
            args.bootstrap_server,
            args.topic,
            num_records=args.num_records,
            record_size=args.record_size,
            throughput=args.throughput,
            acks=ACKS[args.acks],
            compression=rb.CODECS[args.compression],
            idempotence=args.idempotence,
            **optional,
        )
    if args.perf_command == "consume":
        return functools.partial(
            ours.consume,
            args.bootstrap_server,
            args.topic,
            num_records=args.num_records,
            fetch_max_bytes=args.fetch_max_bytes or 1048576,
            timeout_s=args.timeout,
        )
    optional = {"linger_ms": args.linger_ms} if args.linger_ms is not None else {}
    return functools.partial(
        ours.end_to_end,
        args.bootstrap_server,
        args.topic,
        num_records=args.num_records,
        throughput=args.throughput,
        record_size=args.record_size,
        acks=ACKS[args.acks],
        partition=args.partition,
        timeout_s=args.timeout,
        **optional,
    )


def run(args: argparse.Namespace) -> int:
    prog = f"perf {args.perf_command}"
    problem = _check(args)
    if problem:
        print(f"minikafka {prog}: {problem}", file=sys.stderr)
        return 2
    if args.client == "confluent":
        from minikafka_cli.perf_tools.confluent import PerfClientError

        try:
            result = _confluent(args)
        except PerfClientError as e:
            print(f"minikafka {prog}: {e}", file=sys.stderr)
            return 1
    else:
        status, result = run_trio(prog, _ours(args))
        if status:
            return status
    print(result.to_json() if args.json else result.line())
    return 1 if result.errors else 0
