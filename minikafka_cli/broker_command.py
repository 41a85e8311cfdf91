"""`minikafka broker`: one broker process (Kafka's server.properties keys). The broker
(`broker.main`) is imported only when the command runs, so every other command starts without
loading the broker's modules."""

from __future__ import annotations

import argparse

from broker.command_line import add_arguments

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    """Run the broker (`broker.main.run`); returns the exit status."""
    from broker.main import run as run_broker

    return run_broker(args)
