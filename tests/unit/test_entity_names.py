"""Names that become one ZooKeeper node (users, client ids, ACL resources) are checked before any
ZooKeeper call: `protocol.entity_names.is_node_name` and the three places that use it."""

import pytest

from broker.quota import entities
from protocol.entity_names import is_node_name
from protocol.errors import ErrorCode
from security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    InvalidAcl,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate,
)
from security.credentials import alter_credentials


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("alice", True),
        ("dot.ted", True),
        ("...", True),
        ("%2E%2E", True),
        ("ünïcode", True),
        ("", False),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("nul\x00", False),
        ("bell\x07", False),
        ("del\x7f", False),
        ("private\ue000", False),
        (None, False),
    ],
)
def test_is_node_name(name, ok):
    assert is_node_name(name) is ok


@pytest.mark.parametrize("user", ["..", "."])
def test_a_scram_user_that_cannot_be_a_znode_is_unacceptable_and_changes_nothing(user):
    results, updated = alter_credentials([], [(user, 1, 4096, b"s" * 16, b"p" * 32)], {})
    assert results[user][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL and updated == {}


@pytest.mark.parametrize("name", ["..", ".", ""])
def test_a_quota_entity_that_cannot_be_a_znode_is_refused(name):
    with pytest.raises(ValueError, match="Invalid"):
        entities.from_components([(entities.CLIENT_ID, name)])
    assert entities.from_components([(entities.USER, "..x")]) == ("..x", None)


@pytest.mark.parametrize("name", ["..", "a/b"])
def test_an_acl_resource_that_cannot_be_a_znode_is_invalid(name):
    binding = AclBinding(
        ResourcePattern(ResourceType.GROUP, name, PatternType.LITERAL),
        AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW),
    )
    with pytest.raises(InvalidAcl, match="cannot be stored"):
        validate(binding)
