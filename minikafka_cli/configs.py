"""`minikafka configs`, with kafka-configs.sh's options: `--describe [--all]` or `--alter
[--add-config k=v,k2=[a,b]] [--delete-config k,k2]` of `--entity-type topics|brokers` named by
`--entity-name N` or, for brokers, `--entity-default` (the cluster-wide dynamic default).
Describe prints the dynamic configs (all with `--all`) with their synonyms, as Kafka's tool does;
alter uses IncrementalAlterConfigs (SET for each added key, DELETE for each deleted one)."""

from __future__ import annotations

import argparse

from client import KafkaError
from client.admin import BROKER, DELETE, SET, TOPIC, describe_configs, incremental_alter_configs
from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.errors import ErrorCode

SOURCE_NAMES = {
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
}
DYNAMIC = {1, 2, 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show the entity's configs")
    action.add_argument("--alter", action="store_true", help="change the entity's configs")
    parser.add_argument("--entity-type", required=True, choices=["topics", "brokers"])
    name = parser.add_mutually_exclusive_group(required=True)
    name.add_argument("--entity-name", help="the topic, or the broker id")
    name.add_argument("--entity-default", action="store_true", help="brokers: the cluster-wide default")
    parser.add_argument("--all", action="store_true", help="describe: every config, not only the dynamic ones")
    parser.add_argument("--add-config", default="", metavar="K=V,K2=[A,B]", help="alter: keys to set")
    parser.add_argument("--delete-config", default="", metavar="K,K2", help="alter: keys to remove")


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """`k=v,k2=[a,b]` -> [(k, v), (k2, "a,b")] (brackets hold a list value's commas); raises ValueError."""
    items, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    if depth != 0:
        raise ValueError(f"unbalanced brackets in --add-config {text!r}")
    if current:
        items.append(current)
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config entry {item!r} is not KEY=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out.append((key.strip(), value))
    return out


def _entity(args) -> tuple[int, str, str]:
    """(resource type, resource name, words for messages)."""
    if args.entity_type == "topics":
        if args.entity_default:
            raise ValueError("--entity-default is for --entity-type brokers")
        return TOPIC, args.entity_name, f"topic {args.entity_name}"
    if args.entity_default:
        return BROKER, "", "default config for brokers in the cluster"
    if not args.entity_name.isdigit():
        raise ValueError(f"--entity-name {args.entity_name!r} is not a broker id")
    return BROKER, args.entity_name, f"broker {args.entity_name}"


def _line(entry) -> str:
    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, s.source)}:{s.name}={s.value}" for s in entry.synonyms)
    value = "" if entry.value is None else entry.value
    return f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


async def _run(args) -> int:
    resource_type, name, words = _entity(args)
    async with open_cluster(args) as cluster:
        if args.describe:
            entries = await describe_configs(cluster, resource_type, name)
            shown = [e for e in entries if args.all or e.config_source in DYNAMIC]
            if resource_type == BROKER and name == "":
                print("Default configs for brokers in the cluster are:")
            else:
                print(f"{'All' if args.all else 'Dynamic'} configs for {words} are:")
            for entry in sorted(shown, key=lambda e: e.name):
                print(_line(entry))
            return 0
        ops = [(k, SET, v) for k, v in parse_add_config(args.add_config)]
        ops += [(k.strip(), DELETE, None) for k in args.delete_config.split(",") if k.strip()]
        if not ops:
            raise ValueError("--alter needs --add-config or --delete-config")
        code, message = await incremental_alter_configs(cluster, resource_type, name, ops)
        if code != ErrorCode.NONE:
            raise KafkaError(code, message or words)
        print(f"Completed updating {words if name == '' else 'config for ' + words}.")
        return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("configs", _run, args)
    return status or result
