"""The `minikafka` command line, one subcommand per module (each with `add_arguments` and `run`):
`broker` (one broker process), `cluster` (a local ZooKeeper + brokers in the background), `compose` (the docker-compose cluster), `topics`
(create/list/describe/alter/delete), `configs`, `delete-records`, `reassign-partitions`, `log-dirs`,
`produce`, `consume`, `groups`, `share-groups`, `transactions`, `acls`, `users`, `leader-election`, `health`, `perf` (Kafka-style perf tools), and `run`, the main job
(minikafka_cli/flights.py). Bad arguments exit 2 with argparse's one-line message. When the reader of the
output goes away (`minikafka consume ... | head`) the command stops quietly with status 141, as a
Unix tool killed by SIGPIPE does; Ctrl-C ends any command with status 130 and no traceback. `minikafka --version` prints the version and exits 0.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys

from minikafka_cli import (
    acls,
    broker_command,
    client_metrics,
    cluster,
    compose,
    configs,
    consume,
    delete_records,
    groups,
    health,
    leader_election,
    log_dirs,
    perf,
    produce,
    reassign,
    run_job,
    share_groups,
    topics,
    transactions,
    users,
)

COMMANDS = {
    "run": (run_job, "the main job: the flights table through a local cluster, read by PySpark"),
    "broker": (broker_command, "run one broker process (Kafka's server.properties keys)"),
    "cluster": (cluster, "a local cluster: up, status, down, kill, stop, start"),
    "compose": (compose, "the docker-compose cluster: build its images here, up (healthy), down, status"),
    "topics": (topics, "create, list, describe, alter (add partitions) or delete topics"),
    "configs": (configs, "describe or alter topic and broker configs (like kafka-configs.sh)"),
    "delete-records": (delete_records, "delete a partition's records below an offset"),
    "reassign-partitions": (reassign, "generate, execute, verify or cancel partition reassignments"),
    "log-dirs": (log_dirs, "describe the brokers' log dirs"),
    "produce": (produce, "produce records, one per line, from stdin or a file"),
    "consume": (consume, "print a topic's records (alone, or as a member of a consumer group)"),
    "groups": (groups, "list, describe, delete consumer groups; reset or delete their offsets"),
    "share-groups": (share_groups, "list, describe, delete share groups (KIP-932)"),
    "transactions": (transactions, "list or describe transactions and a partition's producers"),
    "leader-election": (leader_election, "elect preferred replicas (or, unclean, any live replica) as leaders"),
    "acls": (acls, "add, remove or list ACLs (like kafka-acls.sh)"),
    "client-metrics": (client_metrics, "list, describe, alter or delete client metrics subscriptions (KIP-714)"),
    "users": (users, "add, delete or describe users' SCRAM credentials (like kafka-configs.sh --entity-type users)"),
    "health": (health, "exit 0 when a broker answers Metadata with a controller (a container healthcheck)"),
    "perf": (perf, "produce, consume and end-to-end perf tests (ours or confluent-kafka)"),
}


def version() -> str:
    """`minikafka --version`: the installed package's version and the Kafka protocol it speaks."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        ours = installed("minikafka")
    except PackageNotFoundError:  # run from a checkout that was never installed
        ours = "unknown (not installed)"
    return f"minikafka {ours} (the wire protocol of Kafka 3.8, and KIP-848's consumer groups of Kafka 4)"


def kafka_action_first(argv: list[str]) -> list[str]:
    """Kafka's tools name their action with a flag anywhere in the line (`kafka-topics.sh --list
    --bootstrap-server B`); ours take it as the word after the command. A command module's
    `KAFKA_ACTIONS` ({flag: action}) lets the flag spelling through: its first action flag
    becomes the action word, unless the action word is already there."""
    if not argv or argv[0] not in COMMANDS:
        return argv
    actions = getattr(COMMANDS[argv[0]][0], "KAFKA_ACTIONS", None)
    if not actions or (len(argv) > 1 and argv[1] in actions.values()):
        return argv
    for i, item in enumerate(argv[1:], start=1):
        if item in actions:
            return [argv[0], actions[item], *argv[1:i], *argv[i + 1 :]]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = kafka_action_first(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="minikafka", description="A Kafka-compatible broker in Python.")
    parser.add_argument("--version", action="version", version=version())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, text) in COMMANDS.items():
        module.add_arguments(sub.add_parser(name, help=text))
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # argparse would name them with the top-level usage; the subcommand's is the useful one
        _innermost(parser, args).error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        return COMMANDS[args.command][0].run(args)
    except KeyboardInterrupt:  # Ctrl-C where a command does not handle it itself: quietly, as a shell tool
        return 128 + signal.SIGINT
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        return _reader_gone()
    except BaseExceptionGroup as group:  # raised from inside a trio nursery
        broken, rest = group.split(BrokenPipeError)
        if broken is None or rest is not None or not _stdout_reader_gone():
            raise
        return _reader_gone()


def _innermost(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command and action `args` names: `minikafka groups describe`'s."""
    while True:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, subparsers[0].dest, None) if subparsers else None
        if chosen not in (subparsers[0].choices if subparsers else {}):
            return parser
        parser = subparsers[0].choices[chosen]


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (the write end then polls POLLERR), so
    a BrokenPipeError from any other socket or pipe still surfaces."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _reader_gone() -> int:
    """stdout's reader closed the pipe: point stdout at /dev/null (so the interpreter's last flush
    cannot fail again) and exit as SIGPIPE would have made us."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
