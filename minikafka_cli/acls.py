"""`minikafka acls`, like `kafka-acls.sh` (CreateAcls, DescribeAcls and DeleteAcls, keys 30, 29, 31):

    minikafka acls --bootstrap-server B [--command-config F] --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders [--resource-pattern-type prefixed]
    minikafka acls ... --remove --allow-principal User:alice --operation Read --topic orders
    minikafka acls ... --list [--topic orders | --group g | --transactional-id t | --cluster]

A resource is `--topic`, `--group`, `--transactional-id` or `--cluster`; `--allow-principal` /
`--deny-principal` (repeatable) with `--allow-host` / `--deny-host` (default `*`) and `--operation`
(repeatable; Kafka's names, e.g. Read, Write, Describe, Create, Alter, ClusterAction, All) make the
entries. `--list` prints Kafka's format; a refused change prints Kafka's error and exits 1.
"""

from __future__ import annotations

import argparse

from minikafka_cli.common import add_connection_arguments, open_cluster, run_trio
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security.acl import (
    OPERATION_NAMES,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

CLUSTER = "kafka-cluster"
_OPERATIONS = {name.lower(): op for op, name in OPERATION_NAMES.items()}


def _operation(text: str) -> AclOperation:
    try:
        return _OPERATIONS[text.replace("-", "").replace("_", "").lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown operation {text!r} (one of {', '.join(OPERATION_NAMES.values())})"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove the ACLs matching the arguments")
    action.add_argument("--list", action="store_true", help="list ACLs (of a resource, or all)")
    resource = parser.add_mutually_exclusive_group()
    resource.add_argument("--topic")
    resource.add_argument("--group")
    resource.add_argument("--transactional-id")
    resource.add_argument("--cluster", action="store_true")
    parser.add_argument(
        "--resource-pattern-type",
        choices=["literal", "prefixed", "any", "match"],
        help="literal (default for --add/--remove), prefixed, or for --list/--remove any (default for --list) or match",
    )
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    parser.add_argument("--operation", action="append", default=[], type=_operation)
    parser.add_argument("--principal", help="--list: only this principal's ACLs")
    parser.add_argument("--force", action="store_true", help="accepted for kafka-acls.sh compatibility")


def _resource(args) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER
    return ResourceType.ANY, None


def _entries(args) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    out = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host or ["*"], AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host or ["*"], AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in hosts:
                for operation in args.operation or ([AclOperation.ANY] if args.remove else []):
                    out.append((principal, host, operation, permission))
    return out


def _describe_line(resource) -> str:
    kind = ResourceType(resource.resource_type).name
    pattern = PatternType(resource.pattern_type).name
    return f"Current ACLs for resource `ResourcePattern(resourceType={kind}, name={resource.resource_name}, patternType={pattern})`:"


async def _run(args) -> int:
    resource_type, name = _resource(args)
    pattern_name = args.resource_pattern_type or ("any" if args.list else "literal")
    pattern = PatternType[pattern_name.upper()]
    if (args.add or args.remove) and resource_type == ResourceType.ANY:
        raise ValueError("--add and --remove need a resource: --topic, --group, --transactional-id or --cluster")
    if args.add and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError("--add takes --resource-pattern-type literal or prefixed")
    entries = _entries(args)
    if args.add and not entries:
        raise ValueError("--add needs --allow-principal or --deny-principal and --operation")
    async with open_cluster(args) as cluster:
        conn = await cluster.any_connection()
        if args.add:
            creations = [
                {
                    "resource_type": resource_type,
                    "resource_name": name,
                    "resource_pattern_type": pattern,
                    "principal": principal,
                    "host": host,
                    "operation": operation,
                    "permission_type": permission,
                }
                for principal, host, operation, permission in entries
            ]
            response = await conn.request(ApiKey.CREATE_ACLS, {"creations": creations})
            failed = [r for r in response.results if r.error_code != ErrorCode.NONE]
            for r in failed:
                print(f"Error: {ErrorCode(r.error_code).name}: {r.error_message}")
            if not failed:
                print(
                    f"Adding ACLs for resource `{resource_type.name}:{name}` ({pattern.name}): {len(creations)} entries"
                )
            return 1 if failed else 0
        if args.remove:
            filters = [
                {
                    "resource_type_filter": resource_type,
                    "resource_name_filter": name,
                    "pattern_type_filter": pattern,
                    "principal_filter": principal,
                    "host_filter": host,
                    "operation": operation,
                    "permission_type": permission,
                }
                for principal, host, operation, permission in entries
            ] or [
                {
                    "resource_type_filter": resource_type,
                    "resource_name_filter": name,
                    "pattern_type_filter": pattern,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": AclOperation.ANY,
                    "permission_type": AclPermissionType.ANY,
                }
            ]
            response = await conn.request(ApiKey.DELETE_ACLS, {"filters": filters})
            status = 0
            for r in response.filter_results:
                if r.error_code != ErrorCode.NONE:
                    print(f"Error: {ErrorCode(r.error_code).name}: {r.error_message}")
                    status = 1
                    continue
                for m in r.matching_acls:
                    print(
                        f"Removed (principal={m.principal}, host={m.host}, "
                        f"operation={AclOperation(m.operation).name}, permissionType={AclPermissionType(m.permission_type).name}) "
                        f"from {ResourceType(m.resource_type).name}:{m.resource_name}"
                    )
            return status
        body = {
            "resource_type_filter": resource_type,
            "resource_name_filter": name,
            "pattern_type_filter": pattern,
            "principal_filter": args.principal,
            "host_filter": None,
            "operation": AclOperation.ANY,
            "permission_type": AclPermissionType.ANY,
        }
        response = await conn.request(ApiKey.DESCRIBE_ACLS, body)
        if response.error_code != ErrorCode.NONE:
            print(f"Error: {ErrorCode(response.error_code).name}: {response.error_message}")
            return 1
        for resource in response.resources:
            print(_describe_line(resource))
            for acl in resource.acls:
                print(
                    f" \t(principal={acl.principal}, host={acl.host}, operation={AclOperation(acl.operation).name}, "
                    f"permissionType={AclPermissionType(acl.permission_type).name})"
                )
            print()
        return 0


def run(args: argparse.Namespace) -> int:
    status, result = run_trio("acls", _run, args)
    return status or result
