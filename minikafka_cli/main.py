"""The `minikafka` command line: `broker` (one broker process), `produce` (records from stdin or a
file), `consume` (print records), `topics` (create/list/describe/delete), `cluster`
(a local ZooKeeper + brokers in the background), `leader-election`, and `run`, the main job, which says plainly that it is not built yet rather than pretending.
Bad arguments exit 2 with argparse's one-line message.
"""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka-compatible broker in Python.")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="the main job: the flights table through a local cluster, read by PySpark")
    run_parser.add_argument("--rows", type=int, help="only the first N rows (default: all 336,776)")
    run_parser.add_argument("--dir", help="cluster directory (default: a fresh one under .minikafka/)")
    from broker import main as broker_main
    from minikafka_cli import cluster, consume, leader_election, produce, topics
    broker_parser = sub.add_parser("broker", help="run one broker process (Kafka's server.properties keys)")
    broker_main.add_arguments(broker_parser)
    produce.add_arguments(sub.add_parser("produce", help="produce records, one per line, from stdin or a file"))
    consume.add_arguments(sub.add_parser("consume", help="print a topic's records"))
    topics.add_arguments(sub.add_parser("topics", help="create, list, describe or delete topics"))
    cluster.add_arguments(sub.add_parser("cluster", help="a local cluster: up, status, down, kill, stop, start"))
    leader_election.add_arguments(sub.add_parser("leader-election", help="elect preferred replicas as leaders"))
    args = parser.parse_args(argv)
    if args.command == "broker":
        return broker_main.run(args)
    if args.command == "produce":
        return produce.run(args)
    if args.command == "consume":
        return consume.run(args)
    if args.command == "topics":
        return topics.run(args)
    if args.command == "cluster":
        return cluster.run(args)
    if args.command == "leader-election":
        return leader_election.run(args)
    if args.command == "run":
        from examples import flights
        return flights.main((["--rows", str(args.rows)] if args.rows else []) + (["--dir", args.dir] if args.dir else []))
    return 2


if __name__ == "__main__":
    sys.exit(main())
