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
    args = parser.parse_args(argv)
    if args.command == "run":
        print("minikafka run: not yet — the local cluster arrives with the main-job issue.")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
