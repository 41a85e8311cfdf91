"""KIP-932's share group offset admin APIs, answered by the group's coordinator over the share
coordinator's state (`coordinator/group/share_offsets.py`, `broker/share/persister.py`):
DescribeShareGroupOffsets (key 90) v0-1, AlterShareGroupOffsets (91) v0, DeleteShareGroupOffsets
(92) v0. Without a group coordinator or a persister the answer is COORDINATOR_NOT_AVAILABLE.

Authorization (as Kafka): describing needs DESCRIBE on the group and on each topic, altering READ
on the group and on each topic, deleting DELETE on the group and READ on each topic
(GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.server import Handler
from coordinator.group import admin as group_admin
from coordinator.group.share_offsets import OffsetsOutcome, PartitionOutcome, TopicOutcome
from coordinator.share.records import SharePartitionKey
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.share.persister import SharePersister
    from protocol.api import Request

ZERO_ID = uuid.UUID(int=0)


def _persister(ctx: BrokerContext) -> SharePersister | None:
    if ctx.group_coordinator is None or ctx.share_manager is None:
        return None
    return ctx.share_manager.persister


async def describe_share_group_offsets(ctx: BrokerContext, request: Request):
    """DescribeShareGroupOffsets (key 90) v0-1: per group, per partition asked (when `Topics` is
    null: the topics whose share state the group holds, and those its members subscribe to) the
    share-partition start offset (SPSO) the share coordinator holds, -1 when the group never
    read it, and from v1 its lag (KIP-1226): the partition's latest offset (the high watermark,
    the last stable offset with the group's `share.isolation.level=read_committed`) less the
    SPSO less the records done past it (the state's DeliveryCompleteCount); -1 when any of
    them is unknown. A group unknown or not a share group is GROUP_ID_NOT_FOUND; a topic
    unknown UNKNOWN_TOPIC_OR_PARTITION."""
    names = ctx.metadata_cache.topic_names()
    groups = []
    for asked in request.body.groups:
        group_id = asked.group_id
        error, message = ErrorCode.NONE, None
        persister = _persister(ctx)
        if not allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif ctx.group_coordinator is None or persister is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            described = group_admin.describe_share_group(ctx.group_coordinator.manager, group_id, names)
            error, message = ErrorCode(described.error_code), described.error_message
        if error != ErrorCode.NONE or persister is None or ctx.group_coordinator is None:
            groups.append({"group_id": group_id, "topics": [], "error_code": error, "error_message": message})
            continue
        topics: list[tuple[str, list[int] | None]]
        if asked.topics is None:
            wanted: set[str] = set()
            group = ctx.group_coordinator.share.group(group_id)
            if group is not None:
                wanted |= group.subscribed_topic_names()
                for topic_id, (name, _) in group.state_partitions.initialized.items():
                    if ctx.metadata_cache.topic_ids.get(name) == topic_id:
                        wanted.add(name)
            topics = [(name, None) for name in sorted(wanted)]
        else:
            topics = [(t.topic_name, list(t.partitions)) for t in asked.topics]
        done: dict[tuple[str, int], int] = {}  # records done past the SPSO, per partition read
        answered = [
            await _share_offsets(ctx, request, persister, group_id, name, parts, done) for name, parts in topics
        ]
        if request.api_version >= 1:
            await _add_lag(ctx, group_id, answered, done)
        groups.append({"group_id": group_id, "topics": answered, "error_code": ErrorCode.NONE, "error_message": None})
    return {"throttle_time_ms": 0, "groups": groups}


async def _share_offsets(
    ctx: BrokerContext,
    request: Request,
    persister: SharePersister,
    group_id: str,
    name: str,
    parts: list[int] | None,
    done: dict[tuple[str, int], int],
):
    """One topic's answer; `done` gets each read partition's DeliveryCompleteCount (the lag's)."""
    topic_id = ctx.metadata_cache.topic_ids.get(name)
    count = len(ctx.metadata_cache.partitions.get(name, {}))
    partitions = []
    for index in parts if parts is not None else range(count):
        entry: dict[str, object] = {
            "partition_index": index,
            "start_offset": -1,
            "leader_epoch": -1,
            "error_code": 0,
            "error_message": None,
        }
        if not allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, name):
            entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic_id is None or not 0 <= index < count:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            summary = await persister.read_summary(SharePartitionKey(group_id, topic_id, index))
            entry.update(
                start_offset=summary.start_offset,
                leader_epoch=summary.leader_epoch,
                error_code=summary.error_code,
                error_message=summary.error_message,
            )
            done[(name, index)] = summary.delivery_complete_count
        partitions.append(entry)
    return {"topic_name": name, "topic_id": topic_id or ZERO_ID, "partitions": partitions}


async def _add_lag(ctx: BrokerContext, group_id: str, topics: list[dict], done: dict[tuple[str, int], int]) -> None:
    """Each partition's `lag` (KIP-1226, v1+; -1 when unknown), the latest offsets asked of the
    partitions' leaders at once; `done`: DeliveryCompleteCount per partition read."""
    known = [
        (t["topic_name"], p["partition_index"])
        for t in topics
        for p in t["partitions"]
        if p["error_code"] == ErrorCode.NONE
        and p["start_offset"] >= 0
        and done.get((t["topic_name"], p["partition_index"]), -1) >= 0
    ]
    latest: dict = {}
    if known and ctx.partition_metadata is not None:
        read_committed = ctx.share_manager is not None and (
            ctx.share_manager.group_configs.get(group_id, "share.isolation.level") == "read_committed"
        )
        latest = await ctx.partition_metadata.latest_offsets(known, read_committed)
    for t in topics:
        for p in t["partitions"]:
            key = (t["topic_name"], p["partition_index"])
            end = latest.get(key)
            p["lag"] = -1 if end is None else max(0, end - p["start_offset"] - done[key])


def _group_refusal(ctx: BrokerContext, request: Request, op: Op) -> tuple[ErrorCode, str | None] | None:
    body = request.body
    if not allowed(ctx, request, op, Resource.GROUP, body.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
    if not body.group_id:
        return ErrorCode.INVALID_GROUP_ID, "The group id is empty."
    if _persister(ctx) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
    return None


def _refused(error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "responses": []}


async def alter_share_group_offsets(ctx: BrokerContext, request: Request):
    """AlterShareGroupOffsets (key 91) v0: each partition's share state starts over at the
    given start offset; the group must have no members (NON_EMPTY_GROUP)."""
    refusal = _group_refusal(ctx, request, Op.READ)
    persister = _persister(ctx)
    if refusal is not None or persister is None or ctx.group_coordinator is None:
        return _refused(*(refusal or (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)))
    asked: dict[str, list[tuple[int, int]]] = {}
    denied: list[TopicOutcome] = []
    for t in request.body.topics:
        parts = [(p.partition_index, p.start_offset) for p in t.partitions]
        if allowed(ctx, request, Op.READ, Resource.TOPIC, t.topic_name):
            asked.setdefault(t.topic_name, []).extend(parts)
        else:
            denied.append(
                TopicOutcome(
                    t.topic_name,
                    partitions=[PartitionOutcome(p, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p, _ in parts],
                )
            )
    outcome = await ctx.group_coordinator.share_offsets.alter(request.body.group_id, asked, persister)
    if outcome.error_code != ErrorCode.NONE:
        return _refused(ErrorCode(outcome.error_code), outcome.error_message)
    return _answer(outcome, denied, partitions=True)


async def delete_share_group_offsets(ctx: BrokerContext, request: Request):
    """DeleteShareGroupOffsets (key 92) v0: the share state of every partition of each topic is
    deleted; the group must have no members (NON_EMPTY_GROUP) and exist (GROUP_ID_NOT_FOUND)."""
    refusal = _group_refusal(ctx, request, Op.DELETE)
    persister = _persister(ctx)
    if refusal is not None or persister is None or ctx.group_coordinator is None:
        return _refused(*(refusal or (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)))
    names: list[str] = []
    denied: list[TopicOutcome] = []
    for t in request.body.topics:
        if allowed(ctx, request, Op.READ, Resource.TOPIC, t.topic_name):
            names.append(t.topic_name)
        else:
            denied.append(TopicOutcome(t.topic_name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    outcome = await ctx.group_coordinator.share_offsets.delete_offsets(request.body.group_id, names, persister)
    if outcome.error_code != ErrorCode.NONE:
        return _refused(ErrorCode(outcome.error_code), outcome.error_message)
    return _answer(outcome, denied, partitions=False)


def _answer(outcome: OffsetsOutcome, denied: list[TopicOutcome], *, partitions: bool) -> dict:
    responses = []
    for t in denied + outcome.topics:
        entry: dict[str, object] = {"topic_name": t.name, "topic_id": t.topic_id}
        if partitions:
            entry["partitions"] = [
                {"partition_index": p.partition, "error_code": p.error_code, "error_message": p.error_message}
                for p in t.partitions
            ]
        else:
            entry |= {"error_code": t.error_code, "error_message": t.error_message}
        responses.append(entry)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: delete_share_group_offsets,
}
