"""Kafka's ACL model and AclAuthorizer decision, pure: ZooKeeper paths and JSON, validation,
filters (ANY, LITERAL, PREFIXED, MATCH), and the authorization rules (super users, deny first,
wildcards, prefixes, implied operations, allow.everyone.if.no.acl.found)."""

import json

import pytest

from security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_acls,
    encode_acls,
    validate,
)
from security.authorizer import AclCache, Authorizer, parse_super_users

Op, P, T = AclOperation, AclPermissionType, ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def entry(principal="User:alice", op=Op.READ, perm=P.ALLOW, host="*"):
    return AccessControlEntry(principal, host, op, perm)


def test_zookeeper_layout_and_json_are_kafkas():
    assert ResourcePattern(T.TOPIC, "orders", LIT).zk_path() == "/kafka-acl/Topic/orders"
    assert ResourcePattern(T.TRANSACTIONAL_ID, "tx", PRE).zk_path() == "/kafka-acl-extended/prefixed/TransactionalId/tx"
    data = encode_acls([entry(op=Op.DESCRIBE_CONFIGS, perm=P.DENY, host="10.0.0.1")])
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Deny", "operation": "DescribeConfigs", "host": "10.0.0.1"}
        ],
    }
    assert decode_acls(data) == [entry(op=Op.DESCRIBE_CONFIGS, perm=P.DENY, host="10.0.0.1")]
    with pytest.raises(InvalidAcl):
        decode_acls(b'{"version":1,"acls":[{"principal":"User:a","operation":"Fly"}]}')


@pytest.mark.parametrize(
    "binding",
    [
        AclBinding(ResourcePattern(T.ANY, "t", LIT), entry()),
        AclBinding(ResourcePattern(T.TOPIC, "t", PatternType.MATCH), entry()),
        AclBinding(ResourcePattern(T.TOPIC, "t", LIT), entry(op=Op.ANY)),
        AclBinding(ResourcePattern(T.TOPIC, "t", LIT), entry(perm=P.ANY)),
        AclBinding(ResourcePattern(T.TOPIC, "t", LIT), entry(principal="alice")),
        AclBinding(ResourcePattern(T.CLUSTER, "my-cluster", LIT), entry(op=Op.CLUSTER_ACTION)),
        AclBinding(ResourcePattern(T.TOPIC, "*", PRE), entry()),
    ],
)
def test_invalid_bindings_are_refused(binding):
    with pytest.raises(InvalidAcl):
        validate(binding)


def test_filters():
    cache = AclCache()
    cache.set(ResourcePattern(T.TOPIC, "orders", LIT), [entry()])
    cache.set(ResourcePattern(T.TOPIC, "*", LIT), [entry("User:bob", Op.WRITE)])
    cache.set(ResourcePattern(T.TOPIC, "ord", PRE), [entry("User:carol", Op.DESCRIBE)])
    cache.set(ResourcePattern(T.GROUP, "orders", LIT), [entry()])

    def names(**kw):
        return sorted((b.pattern.name, b.entry.principal) for b in cache.bindings(AclBindingFilter(**kw)))

    assert len(names()) == 4
    assert names(resource_type=T.TOPIC, name="orders", pattern_type=PatternType.MATCH) == [
        ("*", "User:bob"),
        ("ord", "User:carol"),
        ("orders", "User:alice"),
    ]
    assert names(resource_type=T.TOPIC, pattern_type=PRE) == [("ord", "User:carol")]
    assert names(name="orders", pattern_type=LIT) == [("orders", "User:alice"), ("orders", "User:alice")]
    assert names(operation=Op.WRITE) == [("*", "User:bob")]
    cache.set(ResourcePattern(T.GROUP, "orders", LIT), [])
    assert names(resource_type=T.GROUP) == []


def authorizer(acls, **kw) -> Authorizer:
    cache = AclCache()
    for pattern, entries in acls.items():
        cache.set(pattern, entries)
    return Authorizer(cache, **kw)


def test_authorization_rules():
    orders = ResourcePattern(T.TOPIC, "orders", LIT)
    a = authorizer(
        {
            orders: [entry(op=Op.WRITE), entry("User:mallory", Op.ALL, P.DENY)],
            ResourcePattern(T.TOPIC, "*", LIT): [entry("User:*", Op.READ), entry("User:mallory", Op.READ)],
            ResourcePattern(T.TOPIC, "logs-", PRE): [entry("User:bob", Op.ALTER_CONFIGS, host="10.0.0.9")],
        },
        super_users=parse_super_users("User:admin; User:broker"),
    )

    def can(principal, op, name, host="127.0.0.1", rtype=T.TOPIC):
        return a.authorize(principal, host, op, rtype, name)

    assert can("User:alice", Op.WRITE, "orders") and can("User:alice", Op.DESCRIBE, "orders")  # WRITE implies DESCRIBE
    assert can("User:anyone", Op.READ, "orders")  # the wildcard topic and principal
    assert not can("User:mallory", Op.READ, "orders")  # DENY ALL wins over every ALLOW
    assert not can("User:alice", Op.DELETE, "orders")
    assert can("User:bob", Op.DESCRIBE_CONFIGS, "logs-app", host="10.0.0.9")  # prefix, implied
    assert not can("User:bob", Op.DESCRIBE_CONFIGS, "logs-app")  # another host
    assert not can("User:bob", Op.ALTER_CONFIGS, "metrics")
    assert can("User:broker", Op.CLUSTER_ACTION, "kafka-cluster", rtype=T.CLUSTER)  # super user
    assert not can("User:alice", Op.CLUSTER_ACTION, "kafka-cluster", rtype=T.CLUSTER)  # no ACL: denied by default
    lax = authorizer({}, allow_everyone_if_no_acl_found=True)
    assert lax.authorize("User:alice", "h", Op.CLUSTER_ACTION, T.CLUSTER, "kafka-cluster")
