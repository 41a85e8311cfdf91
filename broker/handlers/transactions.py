"""The producer's transaction APIs, answered by the transactional id's coordinator
(`coordinator/transaction/coordinator.py`, KIP-98):
- AddPartitionsToTxn (key 24) v0-3 (clients): one error per partition; a partition of a topic the cluster
  does not have is UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, as Kafka's
  KafkaApis checks before asking the coordinator;
- AddOffsetsToTxn (key 25) v0-4: adds the group's `__consumer_offsets` partition;
- EndTxn (key 26) v0-4: commit or abort.
PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH below v2, as Kafka does (versions 3 and below
of AddPartitionsToTxn are the clients'). v4 is the brokers' batched, verify-only form (KIP-890
part 1; see `_verify_only`).

Authorization (as Kafka): each needs WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn also WRITE on each topic (refused ones
TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED), AddOffsetsToTxn READ on the group
(GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed, cluster_allowed
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import GROUP_METADATA_TOPIC

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


def _compat(error: ErrorCode, version: int) -> ErrorCode:
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and version < 2 else error


async def _verify_only(ctx: BrokerContext, request: Request) -> dict:
    """AddPartitionsToTxn v4+ from a partition leader (KIP-890 part 1): CLUSTER_ACTION on the
    cluster (else a top-level CLUSTER_AUTHORIZATION_FAILED, as Kafka); each transaction with
    `VerifyOnly` is answered from the coordinator's state without changing it
    (`TransactionCoordinator.verify_partitions`); one that asks to add partitions is answered
    INVALID_REQUEST for its partitions (brokers only verify, as in Kafka 3.8)."""
    if not cluster_allowed(ctx, request, Op.CLUSTER_ACTION):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results_by_transaction": [],
        }
    results = []
    for txn in request.body.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        if not txn.verify_only:
            errors = dict.fromkeys(wanted, ErrorCode.INVALID_REQUEST)
        elif ctx.txn_coordinator is None:
            errors = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            errors = ctx.txn_coordinator.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
        by_topic: dict[str, list] = {}
        for (topic, index), code in errors.items():
            by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": code})
        results.append(
            {
                "transactional_id": txn.transactional_id,
                "topic_results": [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()],
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results_by_transaction": results}


async def add_partitions(ctx: BrokerContext, request: Request):
    body = request.body
    if request.api_version >= 4:
        return await _verify_only(ctx, request)
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if ctx.metadata_cache.get_partition(*tp) is None}
    refused = {tp for tp in wanted if not allowed(ctx, request, Op.WRITE, Resource.TOPIC, tp[0])}
    if not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, body.v3_and_below_transactional_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif refused:
        errors = {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp in refused else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    elif ctx.txn_coordinator is None:
        errors = dict.fromkeys(wanted, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif unknown:
        errors = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        error = await ctx.txn_coordinator.add_partitions(
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            set(wanted),
        )
        errors = dict.fromkeys(wanted, _compat(error, request.api_version))
    by_topic: dict[str, list] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_error_code": code})
    return {
        "throttle_time_ms": 0,
        "results_by_topic_v3_and_below": [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()],
    }


async def add_offsets(ctx: BrokerContext, request: Request):
    body = request.body
    if not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not allowed(ctx, request, Op.READ, Resource.GROUP, body.group_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if ctx.txn_coordinator is None or ctx.group_coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    partition = ctx.group_coordinator.manager.partition_for(body.group_id)
    error = await ctx.txn_coordinator.add_partitions(
        body.transactional_id, body.producer_id, body.producer_epoch, {(GROUP_METADATA_TOPIC, partition)}
    )
    return {"throttle_time_ms": 0, "error_code": _compat(error, request.api_version)}


async def end_txn(ctx: BrokerContext, request: Request):
    body = request.body
    if not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, body.transactional_id):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if ctx.txn_coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    error = await ctx.txn_coordinator.end_txn(
        body.transactional_id, body.producer_id, body.producer_epoch, body.committed
    )
    return {"throttle_time_ms": 0, "error_code": _compat(error, request.api_version)}


HANDLERS: dict[int, Handler] = {
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets,
    ApiKey.END_TXN: end_txn,
}
