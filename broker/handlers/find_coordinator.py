"""FindCoordinator (key 10) v0-5: where a group's coordinator is (key type 0), one key (v0-3) or
a batch of keys (v4+, KIP-699). The coordinator of a group is the leader of its
`__consumer_offsets` partition. The topic is created on first need (as Kafka's
`KafkaApis.getOrCreateInternalTopic`) with the coordinator's settings (`broker/internal_topics.py`);
while fewer brokers are alive than that replication factor, or while the partition has no leader,
the answer is COORDINATOR_NOT_AVAILABLE. A transactional id's coordinator (key type 1) is the
leader of its `__transaction_state` partition, created the same way. A share-partition's share
coordinator (key type 2, KIP-932: the key `group:topicId:partition`) is the leader of its
`__share_group_state` partition; only brokers ask (CLUSTER_ACTION). Another key type, an empty
transactional id or a share key of another shape is INVALID_REQUEST.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker import admin_manager
from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.internal_topics import internal_topic_spec
from coordinator.share import records as share_records
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import GROUP_METADATA_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.FIND_COORDINATOR
GROUP, TRANSACTION, SHARE = 0, 1, 2
TOPICS = {GROUP: GROUP_METADATA_TOPIC, TRANSACTION: TRANSACTION_STATE_TOPIC, SHARE: SHARE_GROUP_STATE_TOPIC}
log = logging.getLogger(__name__)


async def find(ctx: BrokerContext, key_type: int, key: str, listener: str = "", request=None) -> dict:
    """One coordinator answer: key, node_id, host, port, error_code, error_message. Needs
    DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the transactional id
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), as Kafka checks."""

    def error(code: ErrorCode, message: str | None = None) -> dict:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}

    if key_type not in TOPICS:
        return error(ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}")
    if key_type == TRANSACTION and not key:
        return error(ErrorCode.INVALID_REQUEST, "a transactional id cannot be empty")
    if key_type == SHARE:
        try:
            share_key = share_records.parse_coordinator_key(key)
        except ValueError as e:
            return error(ErrorCode.INVALID_REQUEST, str(e))
        if request is not None and not cluster_allowed(ctx, request, Op.CLUSTER_ACTION):
            return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif request is not None:
        resource = Resource.GROUP if key_type == GROUP else Resource.TRANSACTIONAL_ID
        if not allowed(ctx, request, Op.DESCRIBE, resource, key):
            return error(
                ErrorCode.GROUP_AUTHORIZATION_FAILED
                if key_type == GROUP
                else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
    spec = internal_topic_spec(ctx, TOPICS[key_type])
    if spec is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    name = spec.name
    if key_type == GROUP:
        assert ctx.group_coordinator is not None, "internal_topic_spec found the coordinator"
        partition = ctx.group_coordinator.manager.partition_for(key)
    elif key_type == TRANSACTION:
        assert ctx.txn_coordinator is not None, "internal_topic_spec found the coordinator"
        partition = ctx.txn_coordinator.manager.partition_for(key)
    else:
        assert ctx.share_coordinator is not None, "internal_topic_spec found the coordinator"
        partition = ctx.share_coordinator.partition_for(share_key)
    cache = ctx.metadata_cache
    if name not in cache.partitions:
        if ctx.zk is not None:
            await admin_manager.auto_create_topic(
                ctx, spec.name, spec.partitions, spec.replication_factor, spec.configs
            )
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    broker = cache.leader_broker(name, partition)
    if broker is None:
        return error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    host, port = broker.on(listener)
    return {
        "key": key,
        "node_id": broker.broker_id,
        "host": host,
        "port": port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if request.api_version >= 4:
        found = [await find(ctx, body.key_type, key, request.listener, request) for key in body.coordinator_keys]
        return {"throttle_time_ms": 0, "coordinators": found}
    one = await find(ctx, body.key_type if request.api_version >= 1 else GROUP, body.key, request.listener, request)
    return {
        "throttle_time_ms": 0,
        "error_code": one["error_code"],
        "error_message": one["error_message"],
        "node_id": one["node_id"],
        "host": one["host"],
        "port": one["port"],
    }
