"""Kafka's ACL model (KIP-290 resource patterns) and its ZooKeeper JSON (Kafka's `AclAuthorizer` /
`ZkAclStore`), pure.

- Enum values are the protocol's (CreateAcls / DescribeAcls / DeleteAcls fields); names are the
  ones Kafka writes in ZooKeeper ("Topic", "Read", "Allow", ...).
- A binding is a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal
  `User:<name>`, host, operation, permission). `*` is the wildcard name, principal `User:*`, host `*`.
- ZooKeeper: literal patterns under `/kafka-acl/<Type>/<name>`, prefixed ones under
  `/kafka-acl-extended/prefixed/<Type>/<name>`, each holding
  `{"version":1,"acls":[{"principal":..,"permissionType":..,"operation":..,"host":..}]}`.
- Filters (DescribeAcls, DeleteAcls): ANY matches every value; pattern type MATCH matches the
  literal pattern of the name, the wildcard `*` and every prefixed pattern the name starts with.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from protocol.entity_names import is_node_name

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


RESOURCE_NAMES: dict[ResourceType, str] = {
    t: _camel(t.name) for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
}
RESOURCE_NAMES[ResourceType.TRANSACTIONAL_ID] = "TransactionalId"
OPERATION_NAMES: dict[AclOperation, str] = {
    o: _camel(o.name) for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
PERMISSION_NAMES: dict[AclPermissionType, str] = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}


class InvalidAcl(ValueError):
    """A binding or ZooKeeper value Kafka would refuse."""


@dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType  # LITERAL or PREFIXED

    def zk_path(self) -> str:
        kind = RESOURCE_NAMES[self.resource_type]
        if self.pattern_type == PatternType.PREFIXED:
            return f"/kafka-acl-extended/prefixed/{kind}/{self.name}"
        return f"/kafka-acl/{kind}/{self.name}"


@dataclass(frozen=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an address, or "*"
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate(binding: AclBinding) -> None:
    """Kafka's checks on CreateAcls: concrete enums, a `Type:name` principal, a cluster resource
    named `kafka-cluster`, no wildcard in a prefixed name. Raises InvalidAcl."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl("the resource type must be concrete")
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl("the pattern type must be LITERAL or PREFIXED")
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidAcl("the operation must be concrete")
    if e.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAcl("the permission must be ALLOW or DENY")
    if ":" not in e.principal:
        raise InvalidAcl(
            f"Could not parse principal from `{e.principal}` (no colon is present separating the principal type from the principal name)"
        )
    if not p.name:
        raise InvalidAcl("the resource name cannot be empty")
    if not is_node_name(p.name):  # the name is a znode under /kafka-acl/<type>/
        raise InvalidAcl(
            f"the resource name {p.name!r} cannot be stored: it must not be '.' or '..' nor hold '/' or control characters"
        )
    if p.resource_type == ResourceType.CLUSTER and p.name != "kafka-cluster":
        raise InvalidAcl("The only valid name for the CLUSTER resource is kafka-cluster")
    if p.pattern_type == PatternType.PREFIXED and p.name == WILDCARD:
        raise InvalidAcl("a prefixed pattern cannot be the wildcard")


def encode_acls(entries: list[AccessControlEntry]) -> bytes:
    """A pattern znode's value."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": PERMISSION_NAMES[e.permission],
            "operation": OPERATION_NAMES[e.operation],
            "host": e.host,
        }
        for e in entries
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> list[AccessControlEntry]:
    """A pattern znode's entries; raises InvalidAcl for an unreadable value."""
    operations = {name: op for op, name in OPERATION_NAMES.items()}
    permissions = {name: p for p, name in PERMISSION_NAMES.items()}
    try:
        doc = json.loads(data or b'{"version":1,"acls":[]}')
        return [
            AccessControlEntry(a["principal"], a["host"], operations[a["operation"]], permissions[a["permissionType"]])
            for a in doc["acls"]
        ]
    except (ValueError, KeyError, TypeError) as e:
        raise InvalidAcl(f"unreadable ACL value: {e}") from None


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls filter; None name / principal / host match anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type != ResourceType.ANY and p.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(p):
            return False
        return (
            (self.principal is None or self.principal == e.principal)
            and (self.host is None or self.host == e.host)
            and (self.operation == AclOperation.ANY or self.operation == e.operation)
            and (self.permission == AclPermissionType.ANY or self.permission == e.permission)
        )

    def _matches_pattern(self, p: ResourcePattern) -> bool:
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if p.pattern_type == PatternType.LITERAL:
                return p.name in (self.name, WILDCARD)
            return self.name.startswith(p.name)
        if self.pattern_type != PatternType.ANY and p.pattern_type != self.pattern_type:
            return False
        return self.name is None or p.name == self.name


# ---- ZooKeeper layout of change notifications (Kafka's ZkAclChangeStore) ---------------------
LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
RESOURCE_TYPES_BY_NAME = {name: t for t, name in RESOURCE_NAMES.items()}


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(changes path, notification value) announcing that `pattern`'s ACLs changed: literal
    patterns as `Type:name` under /kafka-acl-changes, prefixed ones as JSON under
    /kafka-acl-extended-changes (Kafka's two change stores)."""
    kind = RESOURCE_NAMES[pattern.resource_type]
    if pattern.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{kind}:{pattern.name}".encode()
    doc = {"version": 1, "resourceType": kind, "name": pattern.name, "patternType": "PREFIXED"}
    return EXTENDED_CHANGES, json.dumps(doc, separators=(",", ":")).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The pattern a notification names; raises InvalidAcl."""
    try:
        if changes_path == LITERAL_CHANGES:
            kind, _, name = data.decode().partition(":")
            return ResourcePattern(RESOURCE_TYPES_BY_NAME[kind], name, PatternType.LITERAL)
        doc = json.loads(data)
        return ResourcePattern(
            RESOURCE_TYPES_BY_NAME[doc["resourceType"]], doc["name"], PatternType[doc["patternType"].upper()]
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise InvalidAcl(f"unreadable ACL change notification: {e}") from None
