"""`minikafka client-metrics`: KIP-714 client metrics subscriptions, as Kafka's
`kafka-client-metrics.sh` manages them.

- `--list`: the subscriptions' names;
- `--describe [--name N]`: each subscription's metrics, interval and match (all when no name);
- `--alter --name N [--metrics P1,P2] [--interval MS] [--match SELECTOR=REGEX,...]`: creates or
  changes a subscription (`--metrics '*'` asks for every metric; an empty value clears a key);
- `--delete --name N`: removes it.

Exit status 1 with a one-line message for a Kafka error (INVALID_CONFIG, ...), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from client import client_metrics as cm
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio, write_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list the subscriptions")
    action.add_argument("--describe", action="store_true", help="describe one subscription, or all")
    action.add_argument("--alter", action="store_true", help="create or change a subscription")
    action.add_argument("--delete", action="store_true", help="delete a subscription")
    parser.add_argument("--name", help="the subscription (--alter, --delete; --describe: one)")
    parser.add_argument("--metrics", help="alter: metric name prefixes, comma-separated ('*': all)")
    parser.add_argument("--interval", type=int, metavar="MS", help="alter: the push interval in ms (100-3600000)")
    parser.add_argument(
        "--match", help="alter: selector=regex pairs, comma-separated (client_id, client_software_name, ...)"
    )


async def _run(args: argparse.Namespace, out) -> None:
    async with open_cluster(args) as cluster:
        if args.list:
            write_table([["NAME"]] + [[n] for n in await cm.list_subscriptions(cluster)], out)
        elif args.describe:
            names = [args.name] if args.name else await cm.list_subscriptions(cluster)
            rows: list[list] = [["NAME", "METRICS", "INTERVAL-MS", "MATCH"]]
            for name in names:
                d = await cm.describe_subscription(cluster, name)
                rows.append([name, d.get("metrics") or "-", d.get("interval.ms", ""), d.get("match") or "-"])
            write_table(rows, out)
        elif args.delete:
            await cm.delete_subscription(cluster, args.name)
            out.write(f"Client metrics subscription '{args.name}' deleted.\n")
        else:
            changes = {"metrics": args.metrics, "match": args.match}
            configs: dict[str, str | None] = {k: (v or None) for k, v in changes.items() if v is not None}
            if args.interval is not None:
                configs["interval.ms"] = str(args.interval)
            await cm.alter_subscription(cluster, args.name, configs)
            out.write(f"Client metrics subscription '{args.name}' altered.\n")


def _usage_error(args: argparse.Namespace) -> str | None:
    if (args.alter or args.delete) and not args.name:
        return "--alter and --delete need --name"
    if args.alter and args.metrics is None and args.interval is None and args.match is None:
        return "--alter needs --metrics, --interval or --match"
    if not args.alter and (args.metrics is not None or args.interval is not None or args.match is not None):
        return "--metrics, --interval and --match go with --alter"
    return None


def run(args: argparse.Namespace) -> int:
    problem = _usage_error(args)
    if problem is not None:
        print(f"minikafka client-metrics: {problem}", file=sys.stderr)
        return 2
    status, _ = run_trio("client-metrics", _run, args, sys.stdout)
    return status
