"""The command-line options of one broker process (`minikafka broker`), declared apart from
`broker.main` so the CLI builds its help without importing the broker."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `minikafka broker`."""
    parser.add_argument("--config", type=str, help="server.properties file (Kafka's keys)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a configuration key, overriding the file (repeatable)",
    )
    parser.add_argument(
        "--env-config",
        action="store_true",
        help="also read KAFKA_* environment variables (KAFKA_BROKER_ID -> broker.id), as in containers",
    )
    parser.add_argument(
        "--log-file", type=Path, help="write the log to this file, rotated by size (default: standard error)"
    )
    parser.add_argument(
        "--log-file-max-bytes",
        type=_positive,
        default=100 * 1024 * 1024,
        metavar="BYTES",
        help="rotate the log file when it would grow past this size (default 100 MiB)",
    )
    parser.add_argument(
        "--log-file-backups",
        type=_positive,
        default=10,
        metavar="N",
        help="rotated log files kept, FILE.1 (newest) to FILE.N (default 10)",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
