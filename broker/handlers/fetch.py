"""Fetch (key 1) v4-12: consumers read committed data (up to the high watermark), followers read
to the log end; min_bytes/max_wait_ms long polling; response max_bytes and partition_max_bytes
(the first batch is returned even when larger, KIP-74); OFFSET_OUT_OF_RANGE; leader epoch fencing
(KIP-320); incremental fetch sessions (KIP-227, v7+): `broker/fetch_sessions.py`; fetch from followers
(KIP-392, v11+): a follower answers consumers up to its HW, and a leader with the rack-aware
`replica.selector.class` names a `preferred_read_replica` in the consumer's `rack_id`.

Authorization: a follower (replica id >= 0) needs CLUSTER_ACTION on the cluster, a consumer READ
on each topic; a refused topic answers TOPIC_AUTHORIZATION_FAILED and nothing of it is read.
Consumers' fetches count against their `consumer_byte_rate` quota (`broker.quota`).

Served inline (`INLINE`): the server runs `handle_now` in the connection's reader task, with no
task per request; a fetch that must wait is a `DelayedFetch` (`broker/delayed_fetch.py`), completed
by the change that gives it data or at max_wait_ms."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.delayed import DelayedResponse
from broker.server import InlineHandler
from protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.read_results import FetchResult
    from protocol.api import Request


API_KEY = ApiKey.FETCH


def handle_now(ctx: BrokerContext, request: Request, respond: Callable[[dict], None]) -> None:
    """Read the request's partitions now and `respond` with the Fetch response body: at once,
    or when its `DelayedFetch` completes (data arrived, or max_wait_ms passed)."""
    may_read = None
    if ctx.authorizer is not None:
        if request.body.replica_id >= 0:
            follower_ok = cluster_allowed(ctx, request, Op.CLUSTER_ACTION)

            def may_read(topic: str) -> bool:
                return follower_ok
        else:

            def may_read(topic: str) -> bool:
                return allowed(ctx, request, Op.READ, Resource.TOPIC, topic)

    consumer = request.body.replica_id < 0
    if consumer:  # a consumer's response fits its fetch quota's window
        window_bytes = ctx.quotas.fetch.max_value_in_window(request.user, request.client_id)
        if window_bytes is not None:
            request.body["max_bytes"] = max(1, min(request.body.max_bytes, int(window_bytes)))

    def answer(result: FetchResult) -> None:
        throttle_ms = _apply_fetch_quota(ctx, request, result) if consumer else 0
        respond(response_body(result, throttle_ms))

    ctx.replica_manager.fetch_now(request.body, may_read, request.api_version, answer)


async def handle(ctx: BrokerContext, request: Request):
    """The same as a task (the server's path for handlers that are not inline)."""
    answer = DelayedResponse()
    handle_now(ctx, request, answer.complete)
    return await answer.wait()


def response_body(result: FetchResult, throttle_time_ms: int = 0) -> dict:
    """A Fetch v4-12 response body (fields a version lacks are left out when encoding)."""
    return {
        "throttle_time_ms": throttle_time_ms,
        "error_code": result.error_code,
        "session_id": result.session_id,
        "responses": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition_index": p.partition,
                        "error_code": p.error_code,
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "records": p.records,
                        "aborted_transactions": None
                        if p.aborted_transactions is None
                        else [
                            {"producer_id": t.producer_id, "first_offset": t.first_offset}
                            for t in p.aborted_transactions
                        ],
                        "preferred_read_replica": p.preferred_read_replica,
                    }
                    for p in parts
                ],
            }
            for topic, parts in result.topics
        ],
    }


def _apply_fetch_quota(ctx: BrokerContext, request: Request, result: FetchResult) -> int:
    """The consumer byte-rate quota (KIP-13): the result's record bytes are recorded; over the
    quota the records are taken back (not sent, not counted) and the throttle time (ms)
    returned, as Kafka's `handleFetchRequest` does (the partitions stay, empty)."""
    partitions = result.partitions()
    size = sum(len(p.records) for p in partitions)
    now_ms = trio.current_time() * 1000
    quota = ctx.quotas.fetch
    throttle_ms = quota.record(request.user, request.client_id, size, now_ms)
    if throttle_ms > 0:
        quota.unrecord(request.user, request.client_id, size, now_ms)
        for p in partitions:
            p.records = b""
    return throttle_ms


INLINE: dict[int, InlineHandler] = {API_KEY: handle_now}
