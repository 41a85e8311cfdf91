"""Kafka error codes and the exceptions this package raises for bad input.

`ErrorCode` holds Kafka's numeric error codes with Kafka's names (source: Kafka 3.8,
`org.apache.kafka.common.protocol.Errors`). Codes travel as int16 in responses.

Every malformed input this package sees raises a subclass of `ProtocolError`; nothing else
(`IndexError`, `KeyError`, `struct.error`, `UnicodeDecodeError`) leaks out of a decode. Each
exception carries the `ErrorCode` a broker should answer with, where an answer is possible.
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's error codes (int16 on the wire)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


#: Codes Kafka's clients retry (their exceptions extend RetriableException).
RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


class KafkaError(Exception):
    """Base of every failure answered with a Kafka error code, on either side of the wire:
    `error_code` is the code (a class attribute of each subclass, or given per instance when
    one class stands for several codes, as a topic or resource validation does). The broker's
    one mapper from an exception to a code is `error_code_for`."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", error_code: ErrorCode | int | None = None):
        super().__init__(message)
        if error_code is not None:
            self.error_code = ErrorCode(error_code)


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code an exception is answered with: a KafkaError's own, anything else
    UNKNOWN_SERVER_ERROR (the caller logs those: they are bugs)."""
    return exc.error_code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR


class ProtocolError(KafkaError):
    """Base of every decode/encode failure in `protocol/`.

    `error_code` is the Kafka error a broker answers with when the failure concerns one request
    or one batch and an answer is still possible.
    """

    error_code: ErrorCode = ErrorCode.INVALID_REQUEST


class MalformedMessage(ProtocolError):
    """Bytes that do not decode as the declared schema: truncated, trailing garbage, negative
    lengths other than the null marker, invalid UTF-8, varints longer than allowed.
    A broker answers INVALID_REQUEST only if it can; Kafka closes the connection."""

    error_code = ErrorCode.INVALID_REQUEST


class FrameTooLarge(ProtocolError):
    """A size prefix above the limit (`socket.request.max.bytes`, 104857600 by default), or a
    negative one. Raised before any of the frame's body is buffered; the connection must close."""

    error_code = ErrorCode.INVALID_REQUEST

    def __init__(self, size: int, limit: int):
        super().__init__(f"frame size {size} is outside 0..{limit} bytes")
        self.size = size
        self.limit = limit


class UnsupportedApiKey(ProtocolError):
    """A request header naming an API key this broker does not serve (Kafka closes the
    connection; a client learns the served keys from ApiVersions)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, correlation_id: int):
        super().__init__(f"unsupported API key {api_key}")
        self.api_key = api_key
        self.correlation_id = correlation_id


class UnsupportedVersion(ProtocolError):
    """A known API at a version outside the served range. For ApiVersions a broker still
    answers (v0 response, UNSUPPORTED_VERSION, its ranges) so that a newer client downgrades."""

    error_code = ErrorCode.UNSUPPORTED_VERSION

    def __init__(self, api_key: int, api_version: int, correlation_id: int, served: tuple[int, int]):
        super().__init__(f"API key {api_key} version {api_version} is outside {served[0]}..{served[1]}")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.served = served


class FieldNotInVersion(ProtocolError):
    """Building a message whose non-ignorable field holds a non-default value at a version that
    lacks the field (Kafka's UnsupportedVersionException on serialization)."""

    error_code = ErrorCode.UNSUPPORTED_VERSION


class CorruptRecordBatch(ProtocolError):
    """A record batch that fails validation: CRC32C mismatch, a length that overruns the
    buffer, a record count that disagrees with the records, undecodable records."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class UnsupportedMagic(CorruptRecordBatch):
    """A message set in format v0/v1 (magic 0 or 1) or an unknown magic: only RecordBatch v2 is
    served."""

    error_code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class UnsupportedCompression(CorruptRecordBatch):
    """A compression codec id outside none/gzip/snappy/lz4/zstd (0..4)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
