"""`minikafka health --bootstrap-server HOST:PORT [--broker-id N]`: exit 0 when the broker answers
a Metadata request (Kafka API 3) in which a controller is known and, with `--broker-id`, that
broker is registered; else exit 1 with the reason on stderr. The containers' healthcheck."""

from __future__ import annotations

import argparse
import sys

import trio

from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--broker-id", type=int, help="the broker that must be registered")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")


async def _run(args) -> str | None:
    with trio.fail_after(args.timeout):
        async with open_cluster(args, retries=1) as cluster:
            md = await cluster.refresh_metadata([])
    if md.controller_id < 0:
        return "no controller known"
    if args.broker_id is not None and args.broker_id not in md.brokers:
        return f"broker {args.broker_id} is not registered (brokers: {sorted(md.brokers)})"
    return None


def run(args: argparse.Namespace) -> int:
    status, problem = run_trio("health", _run, args)
    if status == 0 and problem is not None:
        print(f"minikafka health: {problem}", file=sys.stderr)
        return 1
    return status


def main(argv: list[str] | None = None) -> int:
    """`python -m minikafka_cli.health ...`: the same check without loading the other commands
    (a healthcheck runs every few seconds)."""
    parser = argparse.ArgumentParser(prog="minikafka health", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
