"""WriteTxnMarkers (key 27) v0-1: a transaction coordinator's COMMIT / ABORT markers
(`protocol/control_records.py`) for partitions this broker leads. Each partition's marker is
appended with acks=-1 (all partitions at once) and answered with its error: NOT_LEADER_OR_FOLLOWER,
NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, INVALID_PRODUCER_EPOCH (the producer moved to a
newer epoch), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch), UNKNOWN_TOPIC_OR_PARTITION.
Once a marker is in an `__consumer_offsets` partition, the group coordinator makes that producer's
pending transactional offsets visible (commit) or drops them (abort), as Kafka's
`GroupCoordinator.scheduleHandleTxnCompletion`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.append import appended
from broker.authz import Op, cluster_allowed
from protocol.api_keys import ApiKey
from protocol.control_records import marker_batch
from protocol.errors import ErrorCode
from protocol.topic_names import GROUP_METADATA_TOPIC
from storage.append_origin import AppendOrigin

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.WRITE_TXN_MARKERS
MARKER_TIMEOUT_MS = 30000  # Kafka's request.timeout.ms for these appends


async def handle(ctx: BrokerContext, request: Request):
    if not cluster_allowed(ctx, request, Op.CLUSTER_ACTION):  # only brokers send markers
        return {
            "markers": [
                {
                    "producer_id": m.producer_id,
                    "topics": [
                        {
                            "name": t.name,
                            "partitions": [
                                {"partition_index": i, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                                for i in t.partition_indexes
                            ],
                        }
                        for t in m.topics
                    ],
                }
                for m in request.body.markers
            ]
        }
    # one append per marker (two markers may name the same partition: they go in request order),
    # all appended before any wait, then every marker's wait for the HW at once
    markers = request.body.markers
    rm = ctx.replica_manager
    pending = []
    for marker in markers:
        batch = marker_batch(
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result
        )
        entries = {(t.name, index): batch for t in marker.topics for index in t.partition_indexes}
        pending.append(rm.append_records(entries, -1, MARKER_TIMEOUT_MS, AppendOrigin.COORDINATOR))
    results: dict[tuple[int, str, int], ErrorCode] = {}
    for i, result in enumerate(pending):
        for (topic, index), outcome in (await appended(result, MARKER_TIMEOUT_MS, rm.delayed_timer.running)).items():
            results[(i, topic, index)] = outcome.error
    answers = []
    for i, marker in enumerate(markers):
        offsets_partitions = [
            index
            for t in marker.topics
            if t.name == GROUP_METADATA_TOPIC
            for index in t.partition_indexes
            if results[(i, t.name, index)] == ErrorCode.NONE
        ]
        if offsets_partitions and ctx.group_coordinator is not None:
            ctx.group_coordinator.txn_offsets.complete_txn(
                marker.producer_id, offsets_partitions, marker.transaction_result
            )
        answers.append(
            {
                "producer_id": marker.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": index, "error_code": results[(i, t.name, index)]}
                            for index in t.partition_indexes
                        ],
                    }
                    for t in marker.topics
                ],
            }
        )
    return {"markers": answers}
