"""Produce (key 0) v3-9: append each partition's record batches on its leader.

acks=1 answers after the local append, acks=-1 once the high watermark covers the batch (or
REQUEST_TIMED_OUT after timeout_ms), acks=0 sends no response at all. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE (CRC, record count),
MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), INVALID_REQUIRED_ACKS,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND). The produce quota (`producer_byte_rate`, `broker.quota`) counts
the request's bytes and answers the throttle time.

Served inline (`INLINE`): the server runs `handle_now` in the connection's reader task, with no
task per request; an acks=-1 produce responds when the DelayedResponse of its append completes
(the high watermark covers its batches: Kafka's DelayedProduce).

Authorization (Kafka's `KafkaApis.handleProduceRequest`): a transactional produce needs WRITE on its
transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE
(else its partitions are TOPIC_AUTHORIZATION_FAILED); refused partitions are not appended."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from broker.append import AppendOrigin, AppendResults
from broker.authz import Op, Resource, allowed
from broker.delayed import DelayedResponse
from broker.server import InlineHandler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.PRODUCE


_FAILED = {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}


def _refused(topic, code: ErrorCode) -> dict:
    return {
        "name": topic.name,
        "partition_responses": [{"index": p.index, "error_code": code, **_FAILED} for p in topic.partition_data],
    }


def _responses(results: AppendResults) -> list[dict]:
    """The append's per-partition results -> a Produce response's `responses` (v3-9 names; the
    encoder drops what a version lacks), grouped by topic in request order."""
    responses: dict[str, list] = {}
    answer: dict[str, object]
    for (topic, index), r in results.items():
        if r.info is not None and r.error == ErrorCode.NONE:
            info = r.info
            answer = {
                "index": index,
                "error_code": ErrorCode.NONE,
                "base_offset": info.first_offset,
                "log_append_time_ms": info.log_append_time,
                "log_start_offset": info.log_start_offset,
            }
        else:
            answer = {"index": index, "error_code": r.error, **_FAILED}
            if r.message is not None:
                answer["error_message"] = r.message
            if r.record_errors:  # KIP-467 (Produce v8+)
                answer["record_errors"] = [
                    {"batch_index": i, "batch_index_error_message": m} for i, m in r.record_errors
                ]
        responses.setdefault(topic, []).append(answer)
    return [{"name": t, "partition_responses": ps} for t, ps in responses.items()]


def handle_now(ctx: BrokerContext, request: Request, respond: Callable[[dict | None], None]) -> None:
    """Append the request's records now and `respond` with the Produce response body (None for
    acks=0): at once, or when the acks=-1 wait completes."""
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
    entries = {(t.name, p.index): p.records for t in topic_data for p in t.partition_data}
    result = ctx.replica_manager.append_records(entries, body.acks, body.timeout_ms, AppendOrigin.CLIENT)
    # the produce byte-rate quota (KIP-13): the request's bytes; over the quota the answer names
    # the throttle time and the server mutes the connection that long (KIP-219)
    throttle_ms = ctx.quotas.produce.record(request.user, request.client_id, request.size, trio.current_time() * 1000)
    if body.acks == 0:
        respond(None)
        return

    def response(results: AppendResults) -> None:
        respond({"responses": _responses(results) + refused, "throttle_time_ms": throttle_ms})

    if isinstance(result, DelayedResponse):
        result.on_complete(response)
    else:
        response(result)


async def handle(ctx: BrokerContext, request: Request):
    """The same as a task (the server's path for handlers that are not inline)."""
    answer = DelayedResponse()
    handle_now(ctx, request, answer.complete)
    return await answer.wait()


INLINE: dict[int, InlineHandler] = {API_KEY: handle_now}
