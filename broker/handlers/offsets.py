"""Committed offsets, answered by the group coordinator (`coordinator.group.offsets`,
`coordinator.group.txn_offsets`): OffsetCommit (key 8) v0-9, OffsetFetch (key 9) v0-9 (v8+ several
groups at once, KIP-709), OffsetDelete (key 47) v0, TxnOffsetCommit (key 28) v0-4.

Version details: OffsetCommit v1 carries a commit timestamp per partition (-1: now), v2-v4 a
retention time (-1: the broker's `offsets.retention.minutes`), v6+ the committed leader epoch;
v9's member epoch is the classic generation id. OffsetFetch v0-v1 report errors per partition,
v2+ also at the top; `topics` null (v2+) asks for all the group's offsets; a partition without a
committed offset answers offset -1 and no error, as Kafka; with v7's `require_stable` (KIP-447) a
partition holding offsets of an open transaction answers UNSTABLE_OFFSET_COMMIT and offset -1.
TxnOffsetCommit v2+ carries the committed leader epoch, v3+ the member id, generation and group
instance id (KIP-447).

Authorization (as Kafka): OffsetCommit READ on the group and each topic, OffsetFetch DESCRIBE on the
group and each topic, OffsetDelete DELETE on the group and READ on each topic, TxnOffsetCommit WRITE
on the transactional id and READ on the group and each topic; a refused group answers
GROUP_AUTHORIZATION_FAILED, a refused topic TOPIC_AUTHORIZATION_FAILED, and nothing is committed
for either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.server import Handler
from coordinator.group.records import OffsetAndMetadata
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def _by_topic(errors: dict) -> list[dict]:
    """{(topic, partition): error} as a response's topics with their partitions' error codes."""
    topics: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return [{"name": t, "partitions": ps} for t, ps in topics.items()]


def _split_by_topic(ctx: BrokerContext, request: Request, offsets: dict, operation: Op) -> tuple[dict, dict]:
    """(the offsets of topics the principal may `operation`, TOPIC_AUTHORIZATION_FAILED for the rest)."""
    ok = {t: allowed(ctx, request, operation, Resource.TOPIC, t) for t, _ in offsets}
    kept = {tp: v for tp, v in offsets.items() if ok[tp[0]]}
    return kept, {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in offsets if not ok[tp[0]]}


def _clamped(ms: int) -> int:
    """A timestamp kept within int64 (the stored offset record's field): a client's commit
    timestamp near 2^63 plus the retention would not fit (Kafka's Java wraps it around)."""
    return max(-(2**63), min(ms, 2**63 - 1))


def _commits(body, version: int, now_ms: int, default_retention_ms: int) -> dict:
    out = {}
    retention = body.retention_time_ms if 2 <= version <= 4 else -1
    for t in body.topics:
        for p in t.partitions:
            commit_ts = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
            if version == 1 and p.commit_timestamp != -1:
                expire = _clamped(commit_ts + default_retention_ms)
            elif retention != -1:
                expire = _clamped(commit_ts + retention)
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


async def offset_commit(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    coordinator = ctx.group_coordinator
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "topics": _by_topic(dict.fromkeys(_commits(body, version, 0, 0), DENIED))}
    refused: dict = {}
    if coordinator is None:
        offsets = _commits(body, version, 0, 0)
        results = dict.fromkeys(offsets, NOT_AVAILABLE)
    else:
        offsets = _commits(body, version, coordinator.wall_clock_ms(), coordinator.config.offsets_retention_ms)
        offsets, refused = _split_by_topic(ctx, request, offsets, Op.READ)
        results = (
            await coordinator.offsets.commit_offsets(
                body.group_id,
                body.generation_id_or_member_epoch if version >= 1 else -1,
                body.member_id if version >= 1 else "",
                body.group_instance_id if version >= 7 else None,
                offsets,
            )
            if offsets
            else {}
        )
    return {"throttle_time_ms": 0, "topics": _by_topic({**results, **refused})}


def _fetch_group(
    ctx: BrokerContext,
    request: Request,
    group_id: str,
    topics,
    require_stable: bool = False,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, list]:
    """One group's OffsetFetch answer: (group error, topics). Needs DESCRIBE on the group; topics
    the principal may not DESCRIBE are left out (all asked) or TOPIC_AUTHORIZATION_FAILED (named)."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    unstable: set = set()
    found: dict = {}
    if not allowed(ctx, request, Op.DESCRIBE, Resource.GROUP, group_id):
        error = DENIED
    elif ctx.group_coordinator is None:
        error = NOT_AVAILABLE
    else:
        error, found = ctx.group_coordinator.offsets.fetch_offsets(group_id, wanted, member)
        if require_stable and error == ErrorCode.NONE:
            unstable = ctx.group_coordinator.txn_offsets.unstable_partitions(group_id)
    if error != ErrorCode.NONE and wanted is not None:
        found = dict.fromkeys(wanted)
    visible = {t: allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, t) for t, _ in found}
    by_topic: dict[str, list] = {}
    for (topic, partition), om in found.items():
        if not visible[topic]:
            if wanted is not None:
                by_topic.setdefault(topic, []).append(
                    {
                        "partition_index": partition,
                        "committed_offset": -1,
                        "committed_leader_epoch": -1,
                        "metadata": "",
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                )
            continue
        if (topic, partition) in unstable:
            om = None
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": om.offset if om else -1,
                "committed_leader_epoch": om.leader_epoch if om else -1,
                "metadata": om.metadata if om else "",
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, partition) in unstable else error,
            }
        )
    return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def offset_fetch(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    if version >= 8:
        groups = []
        for g in body.groups:
            member = (g.member_id, g.member_epoch) if version >= 9 else (None, -1)
            error, topics = _fetch_group(ctx, request, g.group_id, g.topics, body.require_stable, member)
            if error != ErrorCode.NONE:
                topics = []
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    error, topics = _fetch_group(ctx, request, body.group_id, body.topics, version >= 7 and body.require_stable)
    if version >= 2 and error != ErrorCode.NONE:
        topics = []  # v2+: a group error is reported once, at the top (v0-1: on each partition)
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}


async def txn_offset_commit(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    coordinator = ctx.group_coordinator
    now = coordinator.wall_clock_ms() if coordinator is not None else 0
    offsets = {
        (t.name, p.partition_index): OffsetAndMetadata(
            p.committed_offset, p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata or "", now
        )
        for t in body.topics
        for p in t.partitions
    }
    refused: dict = {}
    if not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, body.transactional_id):
        return {
            "throttle_time_ms": 0,
            "topics": _by_topic(dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)),
        }
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "topics": _by_topic(dict.fromkeys(offsets, DENIED))}
    offsets, refused = _split_by_topic(ctx, request, offsets, Op.READ)
    if coordinator is None:
        results = dict.fromkeys(offsets, NOT_AVAILABLE)
    elif not offsets:
        results = {}
    else:
        results = await coordinator.txn_offsets.txn_commit_offsets(
            body.group_id,
            body.producer_id,
            body.producer_epoch,
            body.generation_id if version >= 3 else -1,
            body.member_id if version >= 3 else "",
            body.group_instance_id if version >= 3 else None,
            offsets,
        )
    return {"throttle_time_ms": 0, "topics": _by_topic({**results, **refused})}


async def offset_delete(ctx: BrokerContext, request: Request):
    body = request.body
    wanted = {(t.name, p.partition_index): None for t in body.topics for p in t.partitions}
    if not allowed(ctx, request, Op.DELETE, Resource.GROUP, body.group_id):
        return {"error_code": DENIED, "throttle_time_ms": 0, "topics": []}
    kept, refused = _split_by_topic(ctx, request, wanted, Op.READ)
    results: dict
    if ctx.group_coordinator is None:
        error, results = NOT_AVAILABLE, {}
    else:
        error, results = await ctx.group_coordinator.offsets.delete_offsets(body.group_id, list(kept))
    topics = _by_topic({**results, **refused}) if error == ErrorCode.NONE else []
    return {"error_code": error, "throttle_time_ms": 0, "topics": topics}


HANDLERS: dict[int, Handler] = {
    ApiKey.OFFSET_COMMIT: offset_commit,
    ApiKey.OFFSET_FETCH: offset_fetch,
    ApiKey.OFFSET_DELETE: offset_delete,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit,
}
