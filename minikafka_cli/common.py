"""What every client-side command shares: how it reaches the cluster (`--bootstrap-server`, and
`--command-config` with Kafka's client keys for TLS / SASL, as Kafka's tools take them), one-line
errors and exit statuses (2 for bad input, 1 for an unreachable cluster or a Kafka error), never a
traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from client import ConnectionClosed, KafkaError
from client.cluster import Cluster
from security.config import PLAINTEXT_CLIENT, ClientSecurity, SecurityConfigError, client_security


def add_connection_arguments(parser: argparse.ArgumentParser, config_alias: str | None = None) -> None:
    """`--bootstrap-server` and `--command-config` (also spelled `config_alias`, as Kafka's console
    tools name it: `--producer.config`, `--consumer.config`)."""
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument(
        "--command-config",
        *([config_alias] if config_alias else []),
        dest="command_config",
        type=Path,
        metavar="FILE",
        help="client properties (security.protocol, sasl.mechanism, sasl.jaas.config or "
        "sasl.username/sasl.password, ssl.truststore.location or ssl.ca.location, ...)",
    )


def command_security(args: argparse.Namespace) -> ClientSecurity:
    """The `--command-config` file's settings; raises ValueError (exit 2) for an unreadable file
    or invalid keys."""
    from broker.config import parse_properties

    path = getattr(args, "command_config", None)
    if path is None:
        return PLAINTEXT_CLIENT
    try:
        props = parse_properties(Path(path).read_text())
    except OSError as e:
        raise ValueError(f"cannot read --command-config {path}: {e.strerror}") from None
    try:
        return client_security(props)
    except SecurityConfigError as e:
        raise ValueError(f"--command-config {path}: {e}") from None


def open_cluster(args: argparse.Namespace, **options):
    """`Cluster.open` on `--bootstrap-server` with `--command-config`'s security."""
    return Cluster.open(args.bootstrap_server, security=command_security(args), **options)


def key_values(items: list[str], option: str) -> dict[str, str]:
    """Repeated `KEY=VALUE` options (Kafka's `--property`, `--producer-property`, ...) as a dict,
    the last one winning; raises ValueError (exit 2) naming `option` for an item without `=`."""
    found = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} {item} is not KEY=VALUE")
        found[key.strip()] = value
    return found


def run_trio(prog: str, fn: Callable[..., Awaitable[Any]], *args) -> tuple[int, Any]:
    """trio.run(fn, *args) -> (0, result), or (exit status, None) after printing the error."""
    try:
        return 0, trio.run(fn, *args)
    except ValueError as e:
        print(f"minikafka {prog}: {e}", file=sys.stderr)
        return 2, None
    except (ConnectionClosed, KafkaError, trio.TooSlowError) as e:
        print(f"minikafka {prog}: {e or 'timed out'}", file=sys.stderr)
        return 1, None


def write_table(rows: list[list], out) -> None:
    """`rows` (the header first) as space-aligned columns, as Kafka's group tools print them."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
