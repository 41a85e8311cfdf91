"""Broker-side failures, each carrying the Kafka error code it is answered with.

All of them are `protocol.errors.KafkaError`s; `error_code_for(exc)` (from `protocol.errors`, the
one mapper) answers any exception raised while serving a request with its code: protocol,
storage and broker errors carry `error_code`; anything else is UNKNOWN_SERVER_ERROR (and is
logged by the caller).
"""

from __future__ import annotations

from protocol.errors import ErrorCode, KafkaError, error_code_for

__all__ = ["BrokerError", "error_code_for"]


class BrokerError(KafkaError):
    """A failure of the broker's own rules (not of a request's bytes or of storage)."""


class UnknownTopicOrPartition(BrokerError):
    """This broker hosts no replica of the partition."""

    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class NotLeaderOrFollower(BrokerError):
    """The request needs the leader (or a replica) and this broker is not it."""

    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class FencedLeaderEpoch(BrokerError):
    """The request's leader epoch is older than the partition's (KIP-320)."""

    error_code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpoch(BrokerError):
    """The request's leader epoch is newer than the partition's (KIP-320)."""

    error_code = ErrorCode.UNKNOWN_LEADER_EPOCH


class NotEnoughReplicas(BrokerError):
    """acks=-1 and the ISR is smaller than min.insync.replicas."""

    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


class StaleControllerEpoch(BrokerError):
    """A controller request with an older controller epoch than already seen."""

    error_code = ErrorCode.STALE_CONTROLLER_EPOCH


class StaleBrokerEpoch(BrokerError):
    """A controller request addressed to an earlier registration of this broker."""

    error_code = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailable(BrokerError):
    """A new leader whose HW has not yet reached its epoch's start offset (KIP-207)."""

    error_code = ErrorCode.OFFSET_NOT_AVAILABLE


class PolicyViolation(BrokerError):
    """The topic's configuration forbids the request (DeleteRecords on a compact-only topic)."""

    error_code = ErrorCode.POLICY_VIOLATION
