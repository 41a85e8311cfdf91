"""Produce (key 0) v3-9: append each partition's record batches on its leader.

acks=1 answers after the local append, acks=-1 once the high watermark covers the batch (or
REQUEST_TIMED_OUT after timeout_ms), acks=0 sends no response at all. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE (CRC, record count),
MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), INVALID_REQUIRED_ACKS,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND). The produce quota (`producer_byte_rate`, `broker.quota`) counts
the request's bytes and answers the throttle time.

Served inline (`INLINE`): the server runs `handle_now` in the connection's reader task, with no
task per request; an acks=-1 produce returns a DelayedResponse that the replica manager completes
when the high watermark covers its batches (Kafka's DelayedProduce).

Authorization (Kafka's `KafkaApis.handleProduceRequest`): a transactional produce needs WRITE on its
transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE
(else its partitions are TOPIC_AUTHORIZATION_FAILED); refused partitions are not appended."""

from collections.abc import Callable
from typing import Any

import trio

from broker.authz import Op, Resource, allowed
from broker.delayed import DelayedResponse
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

API_KEY = ApiKey.PRODUCE


def _refused(topic, code: ErrorCode) -> dict:
    failed = {"error_code": code, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
    return {"name": topic.name, "partition_responses": [{"index": p.index, **failed} for p in topic.partition_data]}


def handle_now(ctx, request) -> dict | DelayedResponse | None:
    """The Produce response body (None for acks=0), or a DelayedResponse completed with it."""
    body = request.body
    topic_data, refused = body.topic_data, []
    if ctx.authorizer is not None:
        tid = body.transactional_id
        if tid is not None and not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, tid):
            topic_data, refused = [], [_refused(t, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in topic_data]
        else:
            may = [allowed(ctx, request, Op.WRITE, Resource.TOPIC, t.name) for t in topic_data]
            refused = [_refused(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t, ok in zip(topic_data, may) if not ok]
            topic_data = [t for t, ok in zip(topic_data, may) if ok]
    result = ctx.replica_manager.append_records_now(body.acks, body.timeout_ms, topic_data)
    # the produce byte-rate quota (KIP-13): the request's bytes; over the quota the answer names
    # the throttle time and the server mutes the connection that long (KIP-219)
    throttle_ms = ctx.quotas.produce.record(request.user, request.client_id, request.size, trio.current_time() * 1000)
    if body.acks == 0:
        return None

    def response(responses: list) -> dict:
        return {"responses": responses + refused, "throttle_time_ms": throttle_ms}

    if isinstance(result, DelayedResponse):
        return result.map(response)
    return response(result)


async def handle(ctx, request):
    """The same as a task (the server's path for handlers that are not inline)."""
    result = handle_now(ctx, request)
    return await result.wait() if isinstance(result, DelayedResponse) else result


INLINE: dict[int, Callable[[Any, Request], dict | DelayedResponse | None]] = {API_KEY: handle_now}
