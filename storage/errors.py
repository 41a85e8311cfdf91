"""Storage errors, each mapped to the Kafka error code a broker answers with."""

from protocol.errors import ErrorCode, KafkaError


class StorageError(KafkaError):
    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class KafkaStorageError(StorageError):
    """An I/O error or corrupt data in a log dir (Kafka's KafkaStorageException): the broker takes
    that log dir offline (`log_dir`, when known) and the controller moves its leaderships."""

    def __init__(self, message: str, log_dir=None):
        super().__init__(message)
        self.log_dir = log_dir


class OffsetOutOfRange(StorageError):
    """A read at an offset below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLarge(StorageError):
    """A batch larger than `max.message.bytes`."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class InvalidTimestamp(StorageError):
    """A CreateTime record timestamp outside message.timestamp.before.max.ms /
    message.timestamp.after.max.ms of the broker's clock (Kafka's InvalidTimestampException)."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class InvalidAppendOffset(StorageError):
    """A follower append whose batches are not contiguous or start below the log end offset
    (Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException). `first_offset` and
    `last_offset` are the offending batch's when it is the first one appended (else None)."""

    error_code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, first_offset: int | None = None, last_offset: int | None = None):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class UnsafeLogPath(StorageError):
    """A partition directory that would not be a direct child of its log dir (never created,
    renamed or deleted)."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


class CorruptCheckpoint(StorageError):
    """A checkpoint file that does not parse (garbage, wrong version, wrong count)."""


class CorruptIndex(StorageError):
    """An index file that fails its sanity check; the loader rebuilds it from the log."""


class LogDirInUse(StorageError):
    """Another process holds the log directory's `.lock`."""
