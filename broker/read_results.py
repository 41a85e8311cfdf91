"""What the replica manager's reads take and return (Kafka's `FetchParams`, `FetchPartitionData`
and ListOffsets' per-partition result): typed and version-free. The handlers
(`broker/handlers/fetch.py`, `broker/handlers/list_offsets.py`) build each version's response
from them; nothing here knows a field that only some versions carry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from protocol.errors import ErrorCode


class FetchPartition(NamedTuple):
    """One partition's fetch parameters, as in a Fetch request (v7-12 names)."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1


class FetchTopic(NamedTuple):
    topic: str
    partitions: list[FetchPartition]


class FetchView(NamedTuple):
    """What a fetch reads: the request's replica id and byte limits, and the partitions of its
    fetch context (the whole session's for an incremental fetch)."""

    replica_id: int
    max_bytes: int
    min_bytes: int
    topics: list[FetchTopic]
    read_committed: bool = False  # isolation_level 1 (KIP-98): up to the LSO, with aborted transactions
    denied: frozenset[str] = frozenset()  # topics the fetcher may not read (TOPIC_AUTHORIZATION_FAILED)
    #: (topic, partition, HW, log start) -> whether the session already sent that and wants nothing
    #: more (FetchContext.unchanged); None when every partition is answered
    unchanged: Callable[[str, int, int, int], bool] | None = None
    #: KIP-392, consumer Fetch v11+: a follower may answer it (up to its own HW), and a leader
    #: with the rack-aware selector may send the consumer to a replica in `client_rack` ("" when
    #: no selector applies: no rack, no rack-aware selector, or the consumer in this broker's rack)
    any_replica: bool = False
    client_rack: str = ""
    #: a follower's incremental fetch session's `settle(key, follower state)`: called for each
    #: partition this fetch found caught up with nothing to send (broker/fetch_sessions.py)
    settle: Callable[[tuple[str, int], Any], None] | None = None


class AbortedTxn(NamedTuple):
    """An aborted transaction that overlaps a read_committed read (Fetch v4+)."""

    producer_id: int
    first_offset: int  # offsets


@dataclass(slots=True)
class FetchPartitionData:
    """One partition's read (Kafka's `FetchPartitionData`). Offsets are -1 when unknown (an error
    other than OFFSET_OUT_OF_RANGE, or a partition not hosted); `records` is the log's bytes,
    whole batches, never null (Kafka's MemoryRecords.EMPTY on an error: librdkafka cannot parse
    null records); `aborted_transactions` None unless the read is read_committed;
    `preferred_read_replica` a broker id (KIP-392) or -1."""

    partition: int
    error_code: int = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    aborted_transactions: list[AbortedTxn] | None = None
    preferred_read_replica: int = -1


@dataclass(slots=True)
class FetchResult:
    """A fetch's answer: the session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
    ...; then no partitions), the fetch session id (0: none), and the partitions answered per
    topic in request order (an incremental session's only those with news)."""

    error_code: int
    session_id: int
    topics: list[tuple[str, list[FetchPartitionData]]] = field(default_factory=list)

    def partitions(self) -> list[FetchPartitionData]:
        return [p for _, parts in self.topics for p in parts]


def denied_read(partition: int) -> FetchPartitionData:
    """A partition of a topic the fetcher may not read: nothing of it is read."""
    return FetchPartitionData(partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


@dataclass(slots=True)
class ListedOffset:
    """One partition of a ListOffsets answer: the offset and its record's timestamp (ms) and
    leader epoch, each -1 when none; `error_code` Kafka's."""

    partition: int
    error_code: int = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1
