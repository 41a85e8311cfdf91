"""Committed offsets, answered by the group coordinator (`coordinator.group.offsets`):
OffsetCommit (key 8) v0-9, OffsetFetch (key 9) v0-9 (v8+ several groups at once, KIP-709),
OffsetDelete (key 47) v0.

Version details: OffsetCommit v1 carries a commit timestamp per partition (-1: now), v2-v4 a
retention time (-1: the broker's `offsets.retention.minutes`), v6+ the committed leader epoch;
v9's member epoch is the classic generation id. OffsetFetch v0-v1 report errors per partition,
v2+ also at the top; `topics` null (v2+) asks for all the group's offsets; a partition without a
committed offset answers offset -1 and no error, as Kafka; v7's `require_stable` has no effect
until transactions exist (no offset is ever pending).
"""

from broker.server import Handler
from coordinator.group.records import OffsetAndMetadata
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE


def _by_topic(errors: dict) -> list[dict]:
    """{(topic, partition): error} as a response's topics with their partitions' error codes."""
    topics: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def _commits(body, version: int, now_ms: int, default_retention_ms: int) -> dict:
    out = {}
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    for t in body.topics:
        for p in t.partitions:
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
            if version == 1 and p.commit_timestamp != -1:
                expire = commit_ts + default_retention_ms
            elif retention != -1:
                expire = commit_ts + retention
            else:
                expire = None
            out[(t.name, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset,
                p.committed_leader_epoch if version >= 6 else -1,
                p.committed_metadata or "",
                commit_ts,
                expire,
            )
    return out


async def offset_commit(ctx, request):
    body, version = request.body, request.api_version
    coordinator = ctx.group_coordinator
    if coordinator is None:
        offsets = _commits(body, version, 0, 0)
        results = dict.fromkeys(offsets, NOT_AVAILABLE)
    else:
        offsets = _commits(body, version, coordinator.wall_clock_ms(), coordinator.config.offsets_retention_ms)
        results = await coordinator.commit_offsets(
            body.group_id,
            body.generation_id_or_member_epoch if version >= 1 else -1,
            body.member_id if version >= 1 else "",
            body.group_instance_id if version >= 7 else None,
            offsets,
        )
    return {"throttle_time_ms": 0, "topics": _by_topic(results)}


def _fetch_group(ctx, group_id: str, topics) -> tuple[ErrorCode, list]:
    """One group's OffsetFetch answer: (group error, topics)."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if ctx.group_coordinator is None:
        error, found = NOT_AVAILABLE, {}
    else:
        error, found = ctx.group_coordinator.fetch_offsets(group_id, wanted)
    if error != ErrorCode.NONE and wanted is not None:
        found = dict.fromkeys(wanted)
    by_topic: dict[str, list] = {}
    for (topic, partition), om in found.items():
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": om.offset if om else -1,
                "committed_leader_epoch": om.leader_epoch if om else -1,
                "metadata": om.metadata if om else "",
                "error_code": error,
            }
        )
    return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def offset_fetch(ctx, request):
    body, version = request.body, request.api_version
    if version >= 8:
        groups = []
        for g in body.groups:
            error, topics = _fetch_group(ctx, g.group_id, g.topics)
            if error != ErrorCode.NONE:
                topics = []
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(ctx, body.group_id, body.topics)
    if version >= 2 and error != ErrorCode.NONE:
        topics = []  # v2+: a group error is reported once, at the top (v0-1: on each partition)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}


async def offset_delete(ctx, request):
    body = request.body
    wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    if ctx.group_coordinator is None:
        error, results = NOT_AVAILABLE, {}
    else:
        error, results = await ctx.group_coordinator.delete_offsets(body.group_id, wanted)
    return {"error_code": error, "throttle_time_ms": 0, "topics": _by_topic(results) if error == ErrorCode.NONE else []}


HANDLERS: dict[int, Handler] = {
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.OFFSET_DELETE: offset_delete,
}
