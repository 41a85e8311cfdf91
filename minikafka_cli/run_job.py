"""`minikafka run`: the main job (minikafka_cli/flights.py)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, help="only the first N rows (default: all 336,776)")
    parser.add_argument("--dir", help="cluster directory (default: a fresh one under .minikafka/)")
    parser.add_argument(
        "--security",
        choices=["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"],
        default="plaintext",
        help="run on a secured cluster (TLS and/or SASL, ACLs, an admin super user)",
    )


def run(args: argparse.Namespace) -> int:
    from minikafka_cli import flights

    return flights.main(
        (["--rows", str(args.rows)] if args.rows else [])
        + (["--dir", args.dir] if args.dir else [])
        + ["--security", args.security]
    )
