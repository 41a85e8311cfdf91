"""SCRAM credentials as Kafka keeps them in ZooKeeper, and the broker's cache of them.

Format (Kafka's `/config/users/<url-encoded user>` entity config, version 1): JSON
`{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=N"}}`;
other keys of the same entity (user quotas) are kept untouched. A change is announced like any
entity config change (`/config/changes/config_change_<seq>` with entity path `users/<user>`), and
every broker reloads that user's node.

AlterUserScramCredentials (key 51) errors, per user, as Kafka's `ZkAdminManager` answers them:
UNSUPPORTED_SASL_MECHANISM (mechanism 0 or unknown), UNACCEPTABLE_CREDENTIAL (iterations outside
4096..16384, empty user name), DUPLICATE_RESOURCE (one user named twice in a request),
RESOURCE_NOT_FOUND (deleting a credential that does not exist).
"""

from __future__ import annotations

import urllib.parse

from protocol.entity_names import is_node_name
from protocol.errors import ErrorCode
from security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramError,
    credential_from_salted,
)

#: AlterUserScramCredentials / DescribeUserScramCredentials mechanism ids (Kafka's ScramMechanism)
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_NUMBERS = {name: number for number, name in MECHANISM_IDS.items()}


def user_node_name(user: str) -> str:
    """The znode name of a user (Kafka url-encodes user names: `Sanitizer.sanitize`)."""
    return urllib.parse.quote(user, safe="")


def valid_user_name(user: str) -> bool:
    """Whether `user`'s znode name is one node under /config/users (not "", "." or "..")."""
    return is_node_name(user_node_name(user))


def user_from_node_name(name: str) -> str:
    return urllib.parse.unquote(name)


def scram_credentials(config: dict[str, str]) -> dict[str, ScramCredential]:
    """The readable SCRAM credentials of a user's config, by mechanism (unreadable ones skipped)."""
    out = {}
    for mechanism in MECHANISMS:
        if mechanism in config:
            try:
                out[mechanism] = ScramCredential.from_text(config[mechanism])
            except ScramError:
                continue
    return out


class CredentialCache:
    """Every user's SCRAM credentials, as this broker last read them from ZooKeeper."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def update_user(self, user: str, config: dict[str, str]) -> None:
        credentials = scram_credentials(config)
        if credentials:
            self._users[user] = credentials
        else:
            self._users.pop(user, None)

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {u: dict(c) for u, c in self._users.items()}


Result = tuple[ErrorCode, str | None]


def _check(name: str, mechanism_id: int, iterations: int | None = None) -> Result | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if not valid_user_name(name):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username {name!r} cannot name a ZooKeeper node"
    if mechanism_id not in MECHANISM_IDS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def alter_credentials(
    deletions: list[tuple[str, int]],
    upsertions: list[tuple[str, int, int, bytes, bytes]],
    current: dict[str, dict[str, str]],
) -> tuple[dict[str, Result], dict[str, dict[str, str]]]:
    """AlterUserScramCredentials over the users' current configs: (result per user, the new
    config of every user to write). `deletions`: (user, mechanism id); `upsertions`: (user,
    mechanism id, iterations, salt, salted password). A user with any invalid entry is not changed."""
    results: dict[str, Result] = {}
    seen: dict[tuple[str, int], int] = {}
    for name, mechanism_id in deletions:
        seen[(name, mechanism_id)] = seen.get((name, mechanism_id), 0) + 1
    for name, mechanism_id, *_ in upsertions:
        seen[(name, mechanism_id)] = seen.get((name, mechanism_id), 0) + 1
    for (name, _), count in seen.items():
        if count > 1:
            results[name] = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
    for name, mechanism_id in deletions:
        problem = _check(name, mechanism_id)
        if problem is None and MECHANISM_IDS[mechanism_id] not in current.get(name, {}):
            problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            results.setdefault(name, problem)
    for name, mechanism_id, iterations, *_ in upsertions:
        problem = _check(name, mechanism_id, iterations)
        if problem is not None:
            results.setdefault(name, problem)
    updated: dict[str, dict[str, str]] = {}
    for name, mechanism_id in deletions:
        if name not in results:
            config = updated.setdefault(name, dict(current.get(name, {})))
            config.pop(MECHANISM_IDS[mechanism_id], None)
    for name, mechanism_id, iterations, salt, salted in upsertions:
        if name not in results:
            mechanism = MECHANISM_IDS[mechanism_id]
            config = updated.setdefault(name, dict(current.get(name, {})))
            config[mechanism] = credential_from_salted(mechanism, salted, salt, iterations).to_text()
    for name in {n for n, _ in deletions} | {u[0] for u in upsertions}:
        results.setdefault(name, (ErrorCode.NONE, None))
    return results, updated


def describe_credentials(config: dict[str, str]) -> list[tuple[int, int]]:
    """DescribeUserScramCredentials' (mechanism id, iterations) of a user's config."""
    return [(MECHANISM_NUMBERS[m], c.iterations) for m, c in sorted(scram_credentials(config).items())]
