"""Admin APIs served by the active controller (others answer NOT_CONTROLLER, as Kafka's
ZooKeeper mode does): CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6,
ControlledShutdown (key 7) v0-3, CreatePartitions (key 37) v0-3,
AlterPartitionReassignments (key 45) v0, ListPartitionReassignments (key 46) v0, ElectLeaders (key 43) v0-2 (preferred, and from v1 unclean;
`topic_partitions` null means every partition). With
`delete.topic.enable=false` DeleteTopics answers TOPIC_DELETION_DISABLED, as Kafka does.
ControlledShutdown v2+ must carry the broker's current epoch (STALE_BROKER_EPOCH otherwise).

Every request is answered: CreateTopics is done in its own task (`broker.admin_manager`); the
others are events of the controller's loop, and one not answered within its `timeout_ms` (at
least 5 s) answers REQUEST_TIMED_OUT for each of its items, one overtaken by a resignation
NOT_CONTROLLER (`_ask`).

Authorization (as Kafka): CreateTopics needs CREATE on the cluster or the topic, DeleteTopics
DELETE and CreatePartitions ALTER on the topic (refused topics answer TOPIC_AUTHORIZATION_FAILED
and are not passed on); ControlledShutdown CLUSTER_ACTION, the reassignment and election APIs
ALTER (List: DESCRIBE) on the cluster (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from broker import admin_manager
from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.server import Handler
from controller import events
from controller.topics import MAX_PARTITIONS_PER_REQUEST
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.types import ZERO_UUID, FieldDict

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


def _not_controller(ctx: BrokerContext) -> bool:
    return ctx.controller is None or not ctx.controller.active


async def _ask(ctx: BrokerContext, make_event, timeout_ms: int | None = None):
    """The controller's reply to the event `make_event(reply)`, or an ErrorCode for every item of
    the request: REQUEST_TIMED_OUT when no reply came within `timeout_ms` (at least 5 s; 30 s when
    None), NOT_CONTROLLER when the controller resigned before the event ran, UNKNOWN_SERVER_ERROR
    when handling it failed (logged by the controller). A request is always answered."""
    timeout_s = 30.0 if timeout_ms is None else max(timeout_ms / 1000, 5)
    if ctx.controller is None:  # a broker serving without ZooKeeper (unit tests)
        return ErrorCode.NOT_CONTROLLER
    try:
        result = await ctx.controller.request(make_event, timeout_s=timeout_s)
    except trio.TooSlowError:
        return ErrorCode.REQUEST_TIMED_OUT
    if result is None:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return result


def _not_controller_results(topics) -> list[dict]:
    """Per-topic NOT_CONTROLLER results (CreateTopics, CreatePartitions)."""
    return [
        {"name": t.name, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": "not the controller"} for t in topics
    ]


def _split(
    ctx: BrokerContext, request: Request, topics, operation: Op, cluster_too: bool = False
) -> tuple[list, list[dict]]:
    """(the topics the principal may `operation`, TOPIC_AUTHORIZATION_FAILED results for the rest)."""
    if ctx.authorizer is None or (cluster_too and cluster_allowed(ctx, request, operation)):
        return list(topics), []
    ok = [t for t in topics if allowed(ctx, request, operation, Resource.TOPIC, t.name)]
    refused = [
        {"name": t.name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "error_message": None}
        for t in topics
        if not allowed(ctx, request, operation, Resource.TOPIC, t.name)
    ]
    return ok, refused


#: the first versions with strict controller mutation quotas (KIP-599): older ones are accepted
#: and only told the throttle time
STRICT_MUTATION_QUOTA_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3}


def _mutation_quota(
    ctx: BrokerContext, request: Request, names_and_counts: list[tuple[str, int]]
) -> tuple[set[str], int]:
    """KIP-599's controller mutation quota (`controller_mutation_rate`, partitions created or
    deleted per second): the names refused THROTTLING_QUOTA_EXCEEDED (strict versions: while the
    client's rate is already over its quota), and the throttle time to answer. A topic let
    through records its partitions (a burst may pass the quota once, as Kafka's does)."""
    quota = ctx.quotas.controller_mutation
    now_ms = trio.current_time() * 1000
    strict = request.api_version >= STRICT_MUTATION_QUOTA_FROM[ApiKey(request.api_key)]
    refused: set[str] = set()
    for name, count in names_and_counts:
        if strict and quota.would_throttle(request.user, request.client_id, now_ms) > 0:
            refused.add(name)
            continue
        quota.record(request.user, request.client_id, max(0, min(count, MAX_PARTITIONS_PER_REQUEST)), now_ms)
    return refused, quota.would_throttle(request.user, request.client_id, now_ms)


def _throttle_topics(ctx: BrokerContext, request: Request, topics: list, partitions_of) -> tuple[list, list[dict], int]:
    """`_mutation_quota` for CreateTopics / CreatePartitions topic entries, each counting
    `partitions_of(topic)`: (the topics let through, THROTTLING_QUOTA_EXCEEDED results for the
    others, the throttle time). Validate-only requests mutate nothing and are not counted."""
    if not topics or request.body.validate_only:
        return topics, [], 0
    throttled, throttle_ms = _mutation_quota(ctx, request, [(t.name, partitions_of(t)) for t in topics])
    refused = [
        {
            "name": t.name,
            "error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED,
            "error_message": "The throttling quota has been exceeded.",
        }
        for t in topics
        if t.name in throttled
    ]
    return [t for t in topics if t.name not in throttled], refused, throttle_ms


async def create_topics(ctx: BrokerContext, request: Request):
    """Answered by `broker.admin_manager` in this task (Kafka's ZkAdminManager), never queued
    behind the controller's events."""
    body = request.body
    topics, refused = _split(ctx, request, body.topics, Op.CREATE, cluster_too=True)
    topics, throttled, throttle_ms = _throttle_topics(
        ctx,
        request,
        topics,
        lambda t: len(t.assignments) or (t.num_partitions if t.num_partitions != -1 else ctx.config["num.partitions"]),
    )
    refused += throttled
    if not topics:
        results = []
    elif _not_controller(ctx):
        results = _not_controller_results(topics)
    else:
        results = await admin_manager.create_topics(ctx, topics, body.validate_only, body.timeout_ms)
    return {"throttle_time_ms": throttle_ms, "topics": results + refused}


async def delete_topics(ctx: BrokerContext, request: Request):
    body = request.body
    names = list(body.topic_names) + [t.name for t in body.topics if t.name is not None]
    refused = [n for n in names if not allowed(ctx, request, Op.DELETE, Resource.TOPIC, n)]
    refused_set = set(refused)
    names = [n for n in names if n not in refused_set]
    throttled, throttle_ms = _mutation_quota(
        ctx, request, [(n, len(ctx.metadata_cache.partitions.get(n, {}))) for n in names]
    )
    names = [n for n in names if n not in throttled]
    if not names:
        results = []
    elif not ctx.config["delete.topic.enable"]:
        results = [(n, ErrorCode.TOPIC_DELETION_DISABLED) for n in names]
    elif _not_controller(ctx):
        results = [(n, ErrorCode.NOT_CONTROLLER) for n in names]
    else:
        answer = await _ask(ctx, lambda reply: events.DeleteTopics(tuple(names), reply), body.timeout_ms)
        results = [(n, answer) for n in names] if isinstance(answer, ErrorCode) else answer
    return {
        "throttle_time_ms": throttle_ms,
        "responses": [
            {"name": n, "topic_id": ZERO_UUID, "error_code": code}
            for n, code in list(results)
            + [(n, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in refused]
            + [(n, ErrorCode.THROTTLING_QUOTA_EXCEEDED) for n in sorted(throttled)]
        ],
    }


async def create_partitions(ctx: BrokerContext, request: Request):
    """CreatePartitions v0-3 on the controller; a success is answered once this broker's metadata
    has leaders for the new partitions (Kafka's DelayedCreatePartitions), or at `timeout_ms`."""
    body = request.body
    topics, refused = _split(ctx, request, body.topics, Op.ALTER)
    topics, throttled, throttle_ms = _throttle_topics(
        ctx, request, topics, lambda t: t.count - len(ctx.metadata_cache.partitions.get(t.name, {}))
    )
    refused += throttled
    if not topics:
        results = []
    elif _not_controller(ctx):
        results = _not_controller_results(topics)
    else:
        allowed_body = FieldDict(body, topics=topics)
        answer = await _ask(ctx, lambda reply: events.CreatePartitions(allowed_body, reply), body.timeout_ms)
        if isinstance(answer, ErrorCode):
            results = [{"name": t.name, "error_code": answer, "error_message": answer.name} for t in topics]
        else:
            results = answer
        if not body.validate_only and not isinstance(answer, ErrorCode):
            grown = [(t.name, t.count) for t, r in zip(topics, results) if r["error_code"] == ErrorCode.NONE]
            with trio.move_on_after(max(body.timeout_ms, 0) / 1000):
                await ctx.metadata_cache.wait_until(
                    lambda: all(ctx.metadata_cache.get_partition(name, count - 1) for name, count in grown)
                )
    return {"throttle_time_ms": throttle_ms, "results": results + refused}


async def alter_partition_reassignments(ctx: BrokerContext, request: Request):
    """AlterPartitionReassignments v0 (KIP-455) on the controller: start, replace or cancel
    (null replicas) each partition's reassignment; the answer does not wait for completion."""
    body = request.body
    requests = tuple(
        ((t.name, p.partition_index), None if p.replicas is None else tuple(p.replicas))
        for t in body.topics
        for p in t.partitions
    )
    if not cluster_allowed(ctx, request, Op.ALTER):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": None,
            "responses": [],
        }
    if _not_controller(ctx):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NOT_CONTROLLER,
            "error_message": "not the controller",
            "responses": [],
        }
    answer = await _ask(ctx, lambda reply: events.AlterPartitionReassignments(requests, reply), body.timeout_ms)
    if isinstance(answer, ErrorCode):
        return {"throttle_time_ms": 0, "error_code": answer, "error_message": answer.name, "responses": []}
    results = answer
    topics: dict[str, list] = {}
    for (topic, partition), _ in requests:
        code, message = results[(topic, partition)]
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": code, "error_message": message or None}
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "responses": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


async def list_partition_reassignments(ctx: BrokerContext, request: Request):
    """ListPartitionReassignments v0 (KIP-455) on the controller: the ongoing reassignments (of
    the partitions named, or all) with their full replica set and adding / removing replicas."""
    body = request.body
    if not cluster_allowed(ctx, request, Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    if _not_controller(ctx):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "error_message": None, "topics": []}
    partitions = None if body.topics is None else tuple((t.name, p) for t in body.topics for p in t.partition_indexes)
    ongoing = await _ask(ctx, lambda reply: events.ListPartitionReassignments(partitions, reply))
    if isinstance(ongoing, ErrorCode):
        return {"throttle_time_ms": 0, "error_code": ongoing, "error_message": ongoing.name, "topics": []}
    topics: dict[str, list] = {}
    for (topic, partition), (replicas, r) in ongoing.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "replicas": replicas,
                "adding_replicas": r.adding,
                "removing_replicas": r.removing,
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


async def controlled_shutdown(ctx: BrokerContext, request: Request):
    body = request.body
    if ctx.control_plane.off_the_control_plane(ctx, request):  # also checks CLUSTER_ACTION
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    if _not_controller(ctx):
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    answer = await _ask(
        ctx,
        lambda reply: events.ControlledShutdown(body.broker_id, body.broker_epoch, reply),
    )
    code, remaining = (answer, []) if isinstance(answer, ErrorCode) else answer
    return {"error_code": code, "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining]}


async def elect_leaders(ctx: BrokerContext, request: Request):
    body = request.body
    partitions = (
        None if body.topic_partitions is None else [(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    )
    if not cluster_allowed(ctx, request, Op.ALTER):
        results = {tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in partitions or []}
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif _not_controller(ctx):
        results = {tp: ErrorCode.NOT_CONTROLLER for tp in partitions or []}
        top = ErrorCode.NOT_CONTROLLER
    elif body.election_type not in (0, 1):
        results = {tp: ErrorCode.INVALID_REQUEST for tp in partitions or []}
        top = ErrorCode.NONE
    else:
        event = events.ElectPreferredLeaders if body.election_type == 0 else events.ElectUncleanLeaders
        answer = await _ask(
            ctx, lambda reply: event(None if partitions is None else tuple(partitions), reply), body.timeout_ms
        )
        top = ErrorCode.NONE
        if isinstance(answer, ErrorCode):
            results, top = {tp: answer for tp in partitions or []}, answer
        else:
            results = answer
    topics: dict[str, list] = {}
    for (topic, partition), code in sorted(results.items()):
        topics.setdefault(topic, []).append(
            {
                "partition_id": partition,
                "error_code": code,
                "error_message": None if code == ErrorCode.NONE else ErrorCode(code).name,
            }
        )
    response = {
        "throttle_time_ms": 0,
        "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in topics.items()],
    }
    if request.api_version >= 1:
        response["error_code"] = top
    return response


HANDLERS: dict[int, Handler] = {
    ApiKey.CREATE_TOPICS: create_topics,
    ApiKey.DELETE_TOPICS: delete_topics,
    ApiKey.CONTROLLED_SHUTDOWN: controlled_shutdown,
    ApiKey.ELECT_LEADERS: elect_leaders,
    ApiKey.CREATE_PARTITIONS: create_partitions,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments,
}
