"""`minikafka configs`, with kafka-configs.sh's options: `--describe [--all]` or `--alter
[--add-config k=v,k2=[a,b]] [--delete-config k,k2]` of `--entity-type topics|brokers|users|clients`
named by `--entity-name N` or `--entity-default`, or Kafka's shortcuts `--topic T`, `--broker B`,
`--broker-defaults`, `--user U`, `--client C` (brokers: the cluster-wide dynamic default; users,
clients: the default quota). A user and a client id combine (`--entity-type users --entity-name u
--entity-type clients --entity-name c`); their configs are client quotas (producer_byte_rate,
consumer_byte_rate, request_percentage, controller_mutation_rate) through Describe/AlterClientQuotas.
Describe prints the dynamic configs (all with `--all`) with their synonyms, as Kafka's tool does;
alter uses IncrementalAlterConfigs (SET for each added key, DELETE for each deleted one)."""

from __future__ import annotations

import argparse

from client import KafkaError
from client.admin import (
    BROKER,
    DELETE,
    SET,
    TOPIC,
    alter_client_quotas,
    describe_client_quotas,
    describe_configs,
    incremental_alter_configs,
)
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
    parser.add_argument(
        "--entity-type",
        action="append",
        choices=["topics", "brokers", "users", "clients"],
        help="repeat for a user and client-id quota entity: --entity-type users --entity-name u "
        "--entity-type clients --entity-name c",
    )
    parser.add_argument(
        "--entity-name",
        action=_Named,
        dest="entity_names",
        metavar="NAME",
        help="the topic, broker id, user or client id",
    )
    parser.add_argument(
        "--entity-default",
        action=_Named,
        nargs=0,
        dest="entity_names",
        help="the default: cluster-wide for brokers, every user or client id for quotas",
    )
    for option, entity_type, metavar, text in (
        ("--topic", "topics", "NAME", "the topic (--entity-type topics --entity-name NAME)"),
        ("--broker", "brokers", "ID", "the broker (--entity-type brokers --entity-name ID)"),
        ("--user", "users", "NAME", "the user, for quotas (--entity-type users --entity-name NAME)"),
        ("--client", "clients", "ID", "the client id, for quotas (--entity-type clients --entity-name ID)"),
    ):
        parser.add_argument(option, action=_Shortcut, entity_type=entity_type, metavar=metavar, help=text)
    parser.add_argument(
        "--broker-defaults",
        action=_Shortcut,
        entity_type="brokers",
        nargs=0,
        help="the cluster-wide broker default (--entity-type brokers --entity-default)",
    )
    parser.add_argument("--all", action="store_true", help="describe: every config, not only the dynamic ones")
    parser.add_argument("--add-config", default="", metavar="K=V,K2=[A,B]", help="alter: keys to set")
    parser.add_argument("--delete-config", default="", metavar="K,K2", help="alter: keys to remove")


class _Named(argparse.Action):
    """--entity-name N and --entity-default, in the order given (paired with --entity-type by
    position, as kafka-configs.sh pairs them); the default is None."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = list(getattr(namespace, self.dest, None) or [])
        names.append(None if option_string == "--entity-default" else values)
        setattr(namespace, self.dest, names)


class _Shortcut(argparse.Action):
    """kafka-configs.sh's `--topic T`, `--broker B`, `--broker-defaults`, `--user U` and
    `--client C`: an --entity-type and its --entity-name (or default) in one option."""

    def __init__(self, *args, entity_type: str, **kwargs):
        self.entity_type = entity_type
        kwargs["dest"] = "entity_names"
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.entity_type = [*(namespace.entity_type or []), self.entity_type]
        names = list(getattr(namespace, "entity_names", None) or [])
        names.append(None if option_string == "--broker-defaults" else values)
        namespace.entity_names = names


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
        raise ValueError(f"unbalanced brackets in --add-config {text}")
    if current:
        items.append(current)
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--add-config entry {item} is not KEY=VALUE")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out.append((key.strip(), value))
    return out


def _pairs(args) -> list[tuple[str, str | None]]:
    """[(entity type, name or None for the default)], checked as kafka-configs.sh checks them."""
    names = getattr(args, "entity_names", None) or []
    if not args.entity_type:
        raise ValueError("name the entity: --entity-type with --entity-name, or --topic, --broker, --user, --client")
    if len(names) != len(args.entity_type):
        raise ValueError("give one --entity-name or --entity-default for each --entity-type")
    pairs = list(zip(args.entity_type, names, strict=True))
    types = [t for t, _ in pairs]
    if len(pairs) > 1 and sorted(types) != ["clients", "users"]:
        raise ValueError("only a user and a client id combine into one entity")
    return pairs


def _entity(args) -> tuple[int, str, str]:
    """(resource type, resource name, words for messages) of a topic or broker entity."""
    (entity_type, name), *_ = _pairs(args)
    if entity_type == "topics":
        if name is None:
            raise ValueError("--entity-default is for --entity-type brokers")
        return TOPIC, name, f"topic {name}"
    if name is None:
        return BROKER, "", "default config for brokers in the cluster"
    if not name.isdigit():
        raise ValueError(f"--entity-name {name} is not a broker id")
    return BROKER, name, f"broker {name}"


def _quota_words(pairs: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{'user' if t == 'users' else 'client-id'} {'<default>' if n is None else n!r}" for t, n in pairs)


async def _run_quotas(args, pairs: list[tuple[str, str | None]]) -> int:
    """Client quotas of a user, client id or both (DescribeClientQuotas / AlterClientQuotas)."""
    entity = [("user" if t == "users" else "client-id", n) for t, n in pairs]
    async with open_cluster(args) as cluster:
        if args.describe:
            components = [(t, 1 if n is None else 0, n) for t, n in entity]
            for _entity_found, values in await describe_client_quotas(cluster, components, strict=True):
                shown = ", ".join(f"{k}={int(v) if v == int(v) else v}" for k, v in sorted(values.items()))
                print(f"Quota configs for {_quota_words(pairs)} are {shown}")
            return 0
        ops: list[tuple[str, float | None]] = []
        for key, value in parse_add_config(args.add_config):
            try:
                ops.append((key, float(value)))
            except ValueError:
                raise ValueError(f"quota {key} must be a number, got {value}") from None
        ops += [(k.strip(), None) for k in args.delete_config.split(",") if k.strip()]
        if not ops:
            raise ValueError("--alter needs --add-config or --delete-config")
        code, message = await alter_client_quotas(cluster, entity, ops)
        if code != ErrorCode.NONE:
            raise KafkaError(code, message or _quota_words(pairs))
        print(f"Completed updating config for {_quota_words(pairs)}.")
        return 0


def _line(entry) -> str:
    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, s.source)}:{s.name}={s.value}" for s in entry.synonyms)
    value = "" if entry.value is None else entry.value
    return f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


async def _run(args) -> int:
    pairs = _pairs(args)
    if pairs[0][0] in ("users", "clients"):
        return await _run_quotas(args, pairs)
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
