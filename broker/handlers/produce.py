"""Produce (key 0) v3-9: append each partition's record batches on its leader.

acks=1 answers after the local append, acks=-1 once the high watermark covers the batch (or
REQUEST_TIMED_OUT after timeout_ms), acks=0 sends no response at all. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, CORRUPT_MESSAGE (CRC, record count),
MESSAGE_TOO_LARGE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic 0/1), INVALID_REQUIRED_ACKS,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND). The produce quota (`producer_byte_rate`, `broker.quota`) counts
the request's bytes and answers the throttle time.

Served inline (`INLINE`): the server runs `handle_now` in the connection's reader task, with no
task per request. The appends are made at the end of the event loop's turn, each partition's
with the other requests' that came for it in the same turn, in one write
(`broker/client_appends.py`); the connection's next request starts after them (the request is
released then), acks=1 responds then, and acks=-1 once the high watermark covers its batches
(Kafka's DelayedProduce). A KIP-890 verified append is made when verified.

Transaction verification (KIP-890 part 1, `transaction.partition.verification.enable`): a
transactional Produce for a partition where its producer has no transaction open yet is held
until the transaction coordinator confirms the partition is in the producer's ongoing transaction
(`broker/txn_verification.py`); unconfirmed partitions are refused (INVALID_TXN_STATE,
INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS while the coordinator cannot tell) and not appended.

Authorization (Kafka's `KafkaApis.handleProduceRequest`): a transactional produce needs WRITE on its
transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE
(else its partitions are TOPIC_AUTHORIZATION_FAILED); refused partitions are not appended."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from broker.append import AppendResults, PartitionAppend
from broker.authz import Op, Resource, allowed
from broker.delayed import DelayedResponse
from broker.server import InlineHandler
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from storage.append_origin import AppendOrigin

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.PRODUCE
log = logging.getLogger(__name__)


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
    # the produce byte-rate quota (KIP-13): the request's bytes; over the quota the answer names
    # the throttle time and the server mutes the connection that long (KIP-219)
    throttle_ms = ctx.quotas.produce.record(request.user, request.client_id, request.size, trio.current_time() * 1000)

    def response(results: AppendResults) -> None:
        if body.acks != 0:
            respond({"responses": _responses(results) + refused, "throttle_time_ms": throttle_ms})

    verifier = ctx.txn_verification
    if body.transactional_id is not None and verifier is not None and verifier.enabled:
        to_verify = ctx.replica_manager.transactions_to_verify(entries)
        if to_verify:
            producer_id = next(iter(to_verify.values()))[0]
        else:  # the header is read again only while some producer's request is held here
            producer_id = _producer_id(entries) if verifier.appending else -1
        previous = verifier.appending.get(producer_id)
        if to_verify or (previous is not None and not previous.is_set()):
            # a producer's requests append in the order they came, whichever waits for the coordinator
            done = verifier.appending[producer_id] = trio.Event()
            verifier.start_soon(
                _verify_then_append, ctx, body, entries, to_verify, response, producer_id, previous, done
            )
            if body.acks == 0:
                respond(None)
            return
        verification: dict | None = {}
    else:
        verification = None
    if verification is None:  # written with the other requests of this loop turn, per partition
        # the connection's next request starts once they are written: released then (acks=0's
        # "no response" releases it too, so it is given then)
        request.release_later = True
        appended = request.release if body.acks != 0 else lambda: respond(None)
        ctx.replica_manager.append_records_soon(entries, body.acks, body.timeout_ms, response, appended)
        return
    _append(ctx, body, entries, verification, response)
    if body.acks == 0:
        respond(None)


def _append(ctx: BrokerContext, body, entries: dict, verification: dict, response) -> None:
    result = ctx.replica_manager.append_records(entries, body.acks, body.timeout_ms, AppendOrigin.CLIENT, verification)
    if isinstance(result, DelayedResponse):
        result.on_complete(response)
    else:
        response(result)


def _producer_id(entries: dict) -> int:
    """The producer id of a request's first readable batch (-1 if none)."""
    for records in entries.values():
        if records and len(records) >= rb.HEADER_SIZE:
            try:
                return rb.read_header(records).producer_id
            except Exception:  # the append answers it
                continue
    return -1


async def _verify_then_append(
    ctx: BrokerContext,
    body,
    entries: dict,
    to_verify: dict,
    response,
    producer_id: int,
    previous: trio.Event | None,
    done: trio.Event,
) -> None:
    """KIP-890 part 1: ask the coordinator about the partitions whose producer has no transaction
    open there (`broker.txn_verification`), then, once the producer's previous request here has
    appended (`previous`), append this one: the verified partitions under the guards taken before
    the question (`to_verify`: partition -> (producer id, epoch, guard)), the others refused with
    the coordinator's answer. Sets `done` once appended."""
    verifier = ctx.txn_verification
    assert verifier is not None, "only called with verification on"
    answered = False

    def once(results: AppendResults) -> None:
        nonlocal answered
        if not answered:
            answered = True
            response(results)

    try:
        by_producer: dict[tuple[int, int], list] = {}
        for tp, (pid, epoch, _) in to_verify.items():
            by_producer.setdefault((pid, epoch), []).append(tp)
        unverified: dict = {}
        for (pid, epoch), tps in by_producer.items():
            unverified |= await verifier.verify(body.transactional_id, pid, epoch, tps)
        if previous is not None:
            await previous.wait()
        _append_verified(ctx, body, entries, to_verify, unverified, once)
    except Exception:  # never the broker's end: the request is answered (once), the error logged
        log.exception("transaction verification of a Produce failed")
        once({tp: PartitionAppend(ErrorCode.UNKNOWN_SERVER_ERROR) for tp in entries})
    finally:
        done.set()
        if verifier.appending.get(producer_id) is done:
            del verifier.appending[producer_id]


def _append_verified(ctx: BrokerContext, body, entries: dict, to_verify: dict, unverified: dict, response) -> None:
    # the guards taken before the coordinator was asked: one a marker voided meanwhile fails the append
    guards = {tp: {pid: guard} for tp, (pid, _, guard) in to_verify.items() if tp not in unverified}
    refused = {tp: PartitionAppend(code, None, _VERIFY_MESSAGES.get(code)) for tp, code in unverified.items()}
    rest = {tp: records for tp, records in entries.items() if tp not in refused}

    def merged(results: AppendResults) -> None:
        response({tp: refused[tp] if tp in refused else results[tp] for tp in entries})

    if rest:
        _append(ctx, body, rest, guards, merged)
    else:
        merged({})


_VERIFY_MESSAGES = {
    ErrorCode.INVALID_TXN_STATE: "Partition was not added to the transaction",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Unable to verify the partition has been added to the transaction",
}


async def handle(ctx: BrokerContext, request: Request):
    """The same as a task (the server's path for handlers that are not inline)."""
    answer = DelayedResponse()
    handle_now(ctx, request, answer.complete)
    return await answer.wait()


INLINE: dict[int, InlineHandler] = {API_KEY: handle_now}
