"""InitProducerId (key 22) v0-5.

- Without a transactional id (idempotent producers): a new producer id, unique across the
  cluster, with epoch 0. A producer recovering from a sequence error (KIP-360) either asks again
  here or bumps its epoch itself; brokers accept a higher epoch starting at sequence 0.
- With a transactional id (KIP-98): answered by the id's transaction coordinator
  (`coordinator/transaction/coordinator.py`): the same producer id with the next epoch, fencing
  any older instance; an open transaction is aborted first (CONCURRENT_TRANSACTIONS meanwhile).
  PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH before v4, as Kafka does.
- Authorization: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without
  one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED, KIP-679).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.authz import Op, Resource, allowed, any_allowed, cluster_allowed
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.INIT_PRODUCER_ID


def _answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}


async def handle(ctx: BrokerContext, request: Request):
    body = request.body
    if body.transactional_id is None:
        if not (
            cluster_allowed(ctx, request, Op.IDEMPOTENT_WRITE) or any_allowed(ctx, request, Op.WRITE, Resource.TOPIC)
        ):
            return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        producer_id = None if ctx.producer_ids is None else await ctx.producer_ids.generate()
        if producer_id is None:  # no block of ids could be claimed from ZooKeeper in time
            return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return _answer(ErrorCode.NONE, producer_id, 0)
    if not allowed(ctx, request, Op.WRITE, Resource.TRANSACTIONAL_ID, body.transactional_id):
        return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if ctx.txn_coordinator is None:
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    expected = (body.producer_id, body.producer_epoch) if request.api_version >= 3 else None
    error, producer_id, epoch = await ctx.txn_coordinator.init_producer_id(
        body.transactional_id, body.transaction_timeout_ms, expected
    )
    if error == ErrorCode.PRODUCER_FENCED and request.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return _answer(error, producer_id, epoch)
