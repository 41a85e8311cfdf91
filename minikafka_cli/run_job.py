"""`minikafka run`: the main job (examples/flights.py)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, help="only the first N rows (default: all 336,776)")
    parser.add_argument("--dir", help="cluster directory (default: a fresh one under .minikafka/)")


def run(args: argparse.Namespace) -> int:
    from examples import flights

    return flights.main((["--rows", str(args.rows)] if args.rows else []) + (["--dir", args.dir] if args.dir else []))
