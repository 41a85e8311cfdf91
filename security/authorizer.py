"""The authorization decision of Kafka's `AclAuthorizer`, pure: an ACL cache (what every broker keeps
of ZooKeeper's ACLs) and `authorize(principal, host, operation, resource)`.

Kafka's rules, in order:
1. a super user (`super.users`, e.g. `User:admin;User:broker`) may do anything;
2. the ACLs that apply to a resource are its literal pattern, the wildcard `*` pattern of its type,
   and every prefixed pattern its name starts with;
3. a DENY that matches (principal or `User:*`, host or `*`, the operation or ALL) refuses;
4. with no ACL at all for the resource, `allow.everyone.if.no.acl.found` decides;
5. otherwise an ALLOW must match, where READ, WRITE, DELETE and ALTER also allow DESCRIBE, and
   ALTER_CONFIGS also allows DESCRIBE_CONFIGS (Kafka's implied operations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation
IMPLIED = {
    Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
}


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


@dataclass
class AclCache:
    """Resource pattern -> its entries, as loaded from ZooKeeper and kept current by the change
    notifications; indexed so a check looks at the resource's own patterns only (a literal lookup
    by name, plus the prefixed patterns of its type)."""

    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)
    _literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = field(default_factory=dict)
    _prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = field(default_factory=dict)

    def set(self, pattern: ResourcePattern, entries) -> None:
        """The entries of a pattern (none: the pattern's znode is gone)."""
        key = (pattern.resource_type, pattern.name)
        prefixed = self._prefixed.setdefault(pattern.resource_type, {})
        if entries:
            self.acls[pattern] = frozen = frozenset(entries)
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed[pattern.name] = frozen
            else:
                self._literal[key] = frozen
        else:
            self.acls.pop(pattern, None)
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.pop(pattern.name, None)
            else:
                self._literal.pop(key, None)

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        out = [AclBinding(p, e) for p, entries in self.acls.items() for e in entries]
        return out if flt is None else [b for b in out if flt.matches(b)]

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        found: list[AccessControlEntry] = []
        found += self._literal.get((resource_type, name), ())
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        for prefix, entries in self._prefixed.get(resource_type, {}).items():
            if name.startswith(prefix):
                found += entries
        return found


@dataclass(frozen=True)
class Authorizer:
    cache: AclCache
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        entries = self.cache.applicable(resource_type, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found

        def matches(e: AccessControlEntry, ops: set[AclOperation]) -> bool:
            return (
                e.principal in (principal, WILDCARD_PRINCIPAL)
                and e.host in (host, WILDCARD)
                and (e.operation == AclOperation.ALL or e.operation in ops)
            )

        if any(e.permission == AclPermissionType.DENY and matches(e, {operation}) for e in entries):
            return False
        allowed_by = IMPLIED.get(operation, {operation})
        return any(e.permission == AclPermissionType.ALLOW and matches(e, allowed_by) for e in entries)

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's `authorizeByResourceType` (KIP-679): may the principal `operation` some
        resource of the type? An ALLOW for it on any pattern, unless a DENY on the type's
        wildcard (or the empty prefix) refuses every resource."""
        if principal in self.super_users:
            return True

        def matches(e: AccessControlEntry) -> bool:
            return (
                e.principal in (principal, WILDCARD_PRINCIPAL)
                and e.host in (host, WILDCARD)
                and (e.operation == AclOperation.ALL or e.operation == operation)
            )

        allowed = denied_everywhere = False
        for pattern, entries in self.cache.acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if not matches(e):
                    continue
                if e.permission == AclPermissionType.ALLOW:
                    allowed = True
                elif pattern.name == WILDCARD or (pattern.pattern_type == PatternType.PREFIXED and pattern.name == ""):
                    denied_everywhere = True
        if denied_everywhere:
            return False
        if allowed:
            return True
        return self.allow_everyone_if_no_acl_found and not any(
            p.resource_type == resource_type for p in self.cache.acls
        )
