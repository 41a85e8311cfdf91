"""SCRAM credential admin (KIP-554), as Kafka's ZooKeeper mode serves it from any broker:
- DescribeUserScramCredentials (key 50, v0): each named user's (mechanism, iterations), read from
  `/config/users/<user>`; all users with credentials when `users` is null or empty. An unknown user is
  RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE.
- AlterUserScramCredentials (key 51, v0): deletions and upsertions (the client sends the salt and
  the salted password; the stored and server keys are derived here), validated per user
  (`security.credentials.alter_credentials`), each changed user's config written with a change
  notification so every broker's credential cache reloads it.
Authorization: DESCRIBE (Describe) or ALTER (Alter) on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from broker.authz import Op, cluster_allowed
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from security.credentials import (
    alter_credentials,
    describe_credentials,
    user_from_node_name,
    user_node_name,
    valid_user_name,
)
from zk import admin, znodes
from zk.client import NoNodeError

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


async def _config(ctx: BrokerContext, user: str) -> dict[str, str]:
    assert ctx.zk is not None, "SCRAM credentials live in ZooKeeper"
    return await admin.fetch_entity_config(ctx.zk, "users", user_node_name(user))


async def describe(ctx: BrokerContext, request: Request):
    body = request.body
    if not cluster_allowed(ctx, request, Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    if ctx.zk is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "results": []}
    if not body.users:  # null or empty: every user (Kafka's describingAllUsers; librdkafka sends [])
        try:
            names = [user_from_node_name(n) for n in await ctx.zk.get_children(znodes.CONFIG_USERS)]
        except NoNodeError:
            names = []
        wanted, strict = sorted(names), False
    else:
        wanted, strict = [u.name for u in body.users], True
    results = []
    counts = Counter(wanted)
    for name in counts:
        if strict and counts[name] > 1:
            results.append(
                _describe_error(
                    name,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single request",
                )
            )
            continue
        if not name:  # would name /config/users itself
            results.append(_describe_error(name, ErrorCode.RESOURCE_NOT_FOUND, "The user name must not be empty"))
            continue
        if not valid_user_name(name):  # "." or "..": no user can have it
            results.append(_describe_error(name, ErrorCode.RESOURCE_NOT_FOUND, f"No user can be named {name!r}"))
            continue
        try:
            infos = describe_credentials(await _config(ctx, name))
        except (ValueError, TypeError, AttributeError) as e:  # a config znode that is not Kafka's JSON
            results.append(_describe_error(name, ErrorCode.UNKNOWN_SERVER_ERROR, f"Error describing: {e}"))
            continue
        if not infos:
            if strict:
                results.append(
                    _describe_error(
                        name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist"
                    )
                )
            continue
        results.append(
            {
                "user": name,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "credential_infos": [{"mechanism": m, "iterations": i} for m, i in infos],
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def _describe_error(name: str, code: ErrorCode, message: str) -> dict:
    return {"user": name, "error_code": code, "error_message": message, "credential_infos": []}


async def alter(ctx: BrokerContext, request: Request):
    body = request.body
    deletions = [(d.name, d.mechanism) for d in body.deletions]
    upsertions = [(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)) for u in body.upsertions]
    names = {n for n, _ in deletions} | {u[0] for u in upsertions}
    if not cluster_allowed(ctx, request, Op.ALTER):
        return {
            "throttle_time_ms": 0,
            "results": [{"user": n, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED} for n in sorted(names)],
        }
    if ctx.zk is None:
        return {
            "throttle_time_ms": 0,
            "results": [{"user": n, "error_code": ErrorCode.UNKNOWN_SERVER_ERROR} for n in sorted(names)],
        }
    current = {n: await _config(ctx, n) for n in names if valid_user_name(n)}
    results, updated = alter_credentials(deletions, upsertions, current)
    for name, config in updated.items():
        await admin.change_entity_config(ctx.zk, "users", user_node_name(name), config)
    return {
        "throttle_time_ms": 0,
        "results": [
            {"user": name, "error_code": code, "error_message": message}
            for name, (code, message) in sorted(results.items())
        ],
    }


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter,
}
