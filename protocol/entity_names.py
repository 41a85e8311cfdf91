"""Names a request makes into one ZooKeeper node name (a user or client id under `/config/users`
and `/config/clients`, an ACL's resource under `/kafka-acl/<type>/`), checked before any ZooKeeper
call so that a bad one gets its API's error code instead of an exception from the ZooKeeper client.
Topic names have their own, stricter rule (`protocol.topic_names`)."""

from __future__ import annotations


def is_node_name(name: object) -> bool:
    """Whether `name` can be one znode name inside a path (ZooKeeper's `PathUtils.validatePath`,
    applied to one component): not empty, not `.` or `..`, no `/`, no NUL, none of the code points
    ZooKeeper refuses (U+0001-U+001F, U+007F-U+009F, U+D800-U+F8FF, U+FFF0-U+FFFF). Every name a
    request makes into a path (a user, a client id, an ACL's resource) is checked with this before
    any ZooKeeper call."""
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name:
        return False
    for ch in name:
        c = ord(ch)
        if c < 0x20 or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c <= 0xFFFF:
            return False
    return True
