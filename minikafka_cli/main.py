"""The `minikafka` command line.

Subcommands arrive with their issues; `run` is the main job (see README) and says plainly that it is not
built yet rather than pretending.
"""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka-compatible broker in Python.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="the main job on an embedded local cluster (not yet built)")
    from broker import main as broker_main
    broker_parser = sub.add_parser("broker", help="run one broker process (Kafka's server.properties keys)")
    broker_main.add_arguments(broker_parser)
    args = parser.parse_args(argv)
    if args.command == "broker":
        return broker_main.run(args)
    if args.command == "run":
        print("minikafka run: not yet — the local cluster arrives with the main-job issue.")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
