"""What every client-side command shares: one-line errors and exit statuses (2 for bad input, 1 for
an unreachable cluster or a Kafka error), never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from client import ConnectionClosed, KafkaError


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
