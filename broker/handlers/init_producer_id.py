"""InitProducerId (key 22) v0-4 for idempotent producers (transactional_id null): a new producer
id, unique across the cluster, with epoch 0. A producer recovering from a sequence error (KIP-360)
either asks again here or bumps its epoch itself; brokers accept a higher epoch starting at
sequence 0. Transactions are not served: a transactional id is answered COORDINATOR_NOT_AVAILABLE."""

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

API_KEY = ApiKey.INIT_PRODUCER_ID


async def handle(ctx, request):
    if request.body.transactional_id is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    producer_id = await ctx.producer_ids.generate()
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
