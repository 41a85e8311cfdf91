"""`minikafka health --bootstrap-server HOST:PORT [--broker-id N]`: exit 0 when the broker answers
a Metadata request (Kafka API 3) in which a controller is known and, with `--broker-id`, that
broker is registered, printing what it saw; else exit 1 with the reason, said for an operator
("cannot reach", "no controller: ...", "not registered: ..."). The containers' healthcheck: Docker
keeps this output (`docker inspect`, `minikafka compose status`)."""

from __future__ import annotations

import argparse
import sys

import trio

from client.cluster import ConnectionClosed
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    parser.add_argument("--broker-id", type=int, help="the broker that must be registered")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds (default 3)")


async def _run(args) -> tuple[bool, str]:
    """(healthy, what was seen or why not)."""
    where = ",".join(args.bootstrap_server) if isinstance(args.bootstrap_server, list) else args.bootstrap_server
    try:
        with trio.fail_after(args.timeout):
            async with open_cluster(args, retries=1) as cluster:
                md = await cluster.refresh_metadata([])
    except trio.TooSlowError:
        return (
            False,
            f"the broker at {where} did not answer Metadata in {args.timeout:g} s (starting, stuck or overloaded)",
        )
    except (ConnectionClosed, OSError) as e:
        return False, f"cannot reach the broker at {where}: {e}"
    registered = sorted(md.brokers)
    if md.controller_id < 0:
        return False, (
            f"no controller: the cluster has no active controller (registered brokers {registered}); "
            "is a ZooKeeper quorum up?"
        )
    if args.broker_id is not None and args.broker_id not in md.brokers:
        return False, (
            f"broker {args.broker_id} is not registered in ZooKeeper (registered: {registered}): "
            "it is still starting, or its ZooKeeper session expired"
        )
    return True, f"healthy: controller {md.controller_id}, registered brokers {registered}"


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("health", _run, args)
    if status != 0:
        return status
    healthy, said = result
    print(f"minikafka health: {said}", file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m minikafka_cli.health ...`: the same check without loading the other commands
    (a healthcheck runs every few seconds)."""
    parser = argparse.ArgumentParser(prog="minikafka health", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
