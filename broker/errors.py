"""Broker-side failures, each carrying the Kafka error code it is answered with.

`error_code_for(exc)` is the one place that maps any exception raised while serving a request to
an error code: protocol, storage and broker errors carry `error_code`; anything else is
UNKNOWN_SERVER_ERROR (and is logged by the caller).
"""

from __future__ import annotations

from protocol.errors import ErrorCode


class BrokerError(Exception):
    error_code = ErrorCode.UNKNOWN_SERVER_ERROR


def _error(name: str, code: ErrorCode, doc: str) -> type[BrokerError]:
    return type(name, (BrokerError,), {"error_code": code, "__doc__": doc})


UnknownTopicOrPartition = _error(
    "UnknownTopicOrPartition", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This broker hosts no replica of the partition."
)
NotLeaderOrFollower = _error(
    "NotLeaderOrFollower",
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    "The request needs the leader (or a replica) and this broker is not it.",
)
FencedLeaderEpoch = _error(
    "FencedLeaderEpoch",
    ErrorCode.FENCED_LEADER_EPOCH,
    "The request's leader epoch is older than the partition's (KIP-320).",
)
UnknownLeaderEpoch = _error(
    "UnknownLeaderEpoch",
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    "The request's leader epoch is newer than the partition's (KIP-320).",
)
NotEnoughReplicas = _error(
    "NotEnoughReplicas", ErrorCode.NOT_ENOUGH_REPLICAS, "acks=-1 and the ISR is smaller than min.insync.replicas."
)
NotEnoughReplicasAfterAppend = _error(
    "NotEnoughReplicasAfterAppend",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    "The ISR shrank below min.insync.replicas while acks=-1 waited.",
)
StaleControllerEpoch = _error(
    "StaleControllerEpoch",
    ErrorCode.STALE_CONTROLLER_EPOCH,
    "A controller request with an older controller epoch than already seen.",
)
StaleBrokerEpoch = _error(
    "StaleBrokerEpoch",
    ErrorCode.STALE_BROKER_EPOCH,
    "A controller request addressed to an earlier registration of this broker.",
)
OffsetNotAvailable = _error(
    "OffsetNotAvailable",
    ErrorCode.OFFSET_NOT_AVAILABLE,
    "A new leader whose HW has not yet reached its epoch's start offset (KIP-207).",
)
PolicyViolation = _error(
    "PolicyViolation",
    ErrorCode.POLICY_VIOLATION,
    "The topic's configuration forbids the request (DeleteRecords on a compact-only topic).",
)
RequestTimedOut = _error("RequestTimedOut", ErrorCode.REQUEST_TIMED_OUT, "A delayed operation timed out.")


def error_code_for(exc: BaseException) -> ErrorCode:
    code = getattr(exc, "error_code", None)
    return ErrorCode(code) if code is not None else ErrorCode.UNKNOWN_SERVER_ERROR
