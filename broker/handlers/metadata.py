"""Metadata (key 3) v1-12: brokers, cluster id, controller id, and topics with their partitions'
leader, leader epoch, replicas, ISR and offline replicas, all from the metadata cache (what the
controller last sent in UpdateMetadata). `topics` null asks for every topic; a topic may be named
or, from v10, given by id. An unknown topic is created when `auto.create.topics.enable` and the
request allow it (answering LEADER_NOT_AVAILABLE until its leaders exist; an internal topic with
its coordinator's settings, `broker/internal_topics.py`), else it answers
UNKNOWN_TOPIC_OR_PARTITION. A name that breaks Kafka's topic rule answers INVALID_TOPIC_EXCEPTION
and is never created.

Authorization: the topics the principal may not DESCRIBE are left out of an all-topics answer and
answer TOPIC_AUTHORIZATION_FAILED when named; auto-creation needs CREATE on the cluster or the topic."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from broker import admin_manager
from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.internal_topics import internal_topic_spec
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import INTERNAL_TOPICS, is_valid_topic_name

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.METADATA


async def _auto_create(ctx: BrokerContext, name: str) -> dict:
    """LEADER_NOT_AVAILABLE once written (until the controller has elected its leaders), else
    why it was not (`broker.admin_manager.auto_create_topic`). An internal topic gets its
    coordinator's settings (Kafka's `AutoTopicCreationManager.creatableTopic`), a plain one
    `num.partitions` and `default.replication.factor`."""
    spec = internal_topic_spec(ctx, name)
    if spec is not None:
        code = await admin_manager.auto_create_topic(ctx, name, spec.partitions, spec.replication_factor, spec.configs)
    elif name in INTERNAL_TOPICS:  # no coordinator here to say how (a broker without one)
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code = await admin_manager.auto_create_topic(
            ctx, name, ctx.config["num.partitions"], ctx.config["default.replication.factor"], {}
        )
    written = code == ErrorCode.NONE
    return {"error_code": ErrorCode.LEADER_NOT_AVAILABLE if written else code, "name": name, "partitions": []}


#: how long a Metadata request to a broker that has not yet had its first UpdateMetadata waits
#: for it (the controller sends it within milliseconds of the broker's registration)
FIRST_UPDATE_WAIT_S = 5.0


async def handle(ctx: BrokerContext, request: Request):
    cache = ctx.metadata_cache
    if not cache.updated:
        # A broker just started knows no broker until the controller's first UpdateMetadata.
        # Answering "no brokers" then leaves librdkafka's AdminClient waiting for its request
        # timeout (it does not ask again), so the answer waits for the cluster, bounded.
        with trio.move_on_after(FIRST_UPDATE_WAIT_S):
            await cache.wait_until(lambda: cache.updated)
    body = request.body
    auto_create = (
        ctx.config["auto.create.topics.enable"]
        and ctx.zk is not None
        and (request.api_version < 4 or body.allow_auto_topic_creation)
    )
    names: list
    if body.topics is None:  # every topic the principal may DESCRIBE
        names = [n for n in sorted(cache.partitions) if allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, n)]
    else:
        by_id = cache.topic_names()
        names = [
            t.name if t.name is not None else None if request.api_version < 12 else by_id.get(t.topic_id, t.topic_id)
            for t in body.topics
        ]
    topics = []
    for name in names:
        if name is None or (not isinstance(name, str) and request.api_version < 12):
            # v10-11 carry topic ids but serve none, and answer names that cannot be null
            # (Kafka: "Topic IDs are not supported in requests for version ...")
            topics.append({"error_code": ErrorCode.INVALID_REQUEST, "name": "", "partitions": []})
            continue
        if not isinstance(name, str):  # an unknown topic id
            topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": name, "partitions": []})
            continue
        if not is_valid_topic_name(name):
            topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []})
            continue
        if body.topics is not None and not allowed(ctx, request, Op.DESCRIBE, Resource.TOPIC, name):
            topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []})
            continue
        topic = cache.topic_metadata(name)
        if topic["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and auto_create:
            if cluster_allowed(ctx, request, Op.CREATE) or allowed(ctx, request, Op.CREATE, Resource.TOPIC, name):
                topic = await _auto_create(ctx, name)
            else:
                topic = {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": []}
        topics.append(topic)
    return {
        "throttle_time_ms": 0,
        "cluster_id": ctx.cluster_id,
        "controller_id": cache.controller_id,
        "brokers": [
            {"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack}
            for b in sorted(cache.brokers.values(), key=lambda b: b.broker_id)
            for host, port in [b.on(request.listener)]
        ],
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }
