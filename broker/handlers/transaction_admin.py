"""Operators' transaction APIs: DescribeTransactions (key 65) v0 and ListTransactions (key 66)
v0-1, answered from the coordinator's state (`coordinator/transaction/admin.py`); DescribeProducers
(key 61) v0, the producer state of partitions this broker leads (NOT_LEADER_OR_FOLLOWER on a
follower, UNKNOWN_TOPIC_OR_PARTITION for one it does not host), as Kafka's
ReplicaManager.activeProducerState.

Authorization (as Kafka): DescribeTransactions needs DESCRIBE on each transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ListTransactions shows only the ids the principal may
DESCRIBE, DescribeProducers needs READ on each topic (TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed
from broker.errors import error_code_for
from broker.server import Handler
from coordinator.transaction import admin
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


async def describe_transactions(ctx: BrokerContext, request: Request):
    states = []
    for tid in request.body.transactional_ids:
        if not allowed(ctx, request, Op.DESCRIBE, Resource.TRANSACTIONAL_ID, tid):
            described = admin.DescribedTransaction(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, tid)
        elif ctx.txn_coordinator is None:
            described = admin.DescribedTransaction(ErrorCode.COORDINATOR_NOT_AVAILABLE, tid)
        else:
            described = admin.describe(ctx.txn_coordinator.manager, tid)
        states.append(_described_body(described))
    return {"throttle_time_ms": 0, "transaction_states": states}


def _described_body(t: admin.DescribedTransaction) -> dict:
    return {
        "error_code": t.error_code,
        "transactional_id": t.transactional_id,
        "transaction_state": t.transaction_state,
        "transaction_timeout_ms": t.transaction_timeout_ms,
        "transaction_start_time_ms": t.transaction_start_time_ms,
        "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch,
        "topics": [{"topic": topic, "partitions": partitions} for topic, partitions in t.topics],
    }


async def list_transactions(ctx: BrokerContext, request: Request):
    body = request.body
    if ctx.txn_coordinator is None:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "unknown_state_filters": [],
            "transaction_states": [],
        }
    coordinator = ctx.txn_coordinator
    listed = admin.list_transactions(
        coordinator.manager,
        list(body.state_filters),
        list(body.producer_id_filters),
        body.duration_filter if request.api_version >= 1 else -1,
        coordinator.clock_ms(),
    )
    return {
        "throttle_time_ms": 0,
        "error_code": listed.error_code,
        "unknown_state_filters": listed.unknown_state_filters,
        "transaction_states": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.transaction_state,
            }
            for t in listed.transaction_states
            if allowed(ctx, request, Op.DESCRIBE, Resource.TRANSACTIONAL_ID, t.transactional_id)
        ],
    }


def _producers(ctx: BrokerContext, request: Request, topic: str, index: int) -> dict:
    entry: dict = {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "active_producers": [],
    }
    if not allowed(ctx, request, Op.READ, Resource.TOPIC, topic):
        return entry | {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    try:
        partition = ctx.replica_manager.get_partition(topic, index)
        partition.require_leader()
    except Exception as e:
        return entry | {"error_code": error_code_for(e), "error_message": str(e)[:200]}
    state = partition.log.producer_state
    entry["active_producers"] = [
        {
            "producer_id": pid,
            "producer_epoch": e.epoch,
            "last_sequence": e.last_seq,
            "last_timestamp": e.last_timestamp,
            "coordinator_epoch": e.coordinator_epoch,
            "current_txn_start_offset": e.current_txn_first_offset,
        }
        for pid, e in sorted(state.producers.items())
    ]
    return entry


async def describe_producers(ctx: BrokerContext, request: Request):
    topics = [
        {"name": t.name, "partitions": [_producers(ctx, request, t.name, i) for i in t.partition_indexes]}
        for t in request.body.topics
    ]
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: dict[int, Handler] = {
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions,
    ApiKey.LIST_TRANSACTIONS: list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers,
}
