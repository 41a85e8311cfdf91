"""Idempotent-producer state of one partition replica (Kafka `ProducerStateManager`).

For each producer id: its epoch and the metadata of its last 5 batches (first/last sequence, first/
last offset, max timestamp). Rules for a batch from a client (Kafka 3.x `ProducerAppendInfo`):
- a batch matching a cached one (epoch, first and last sequence) is a duplicate: the caller answers
  with the cached offsets and appends nothing;
- an epoch older than the producer's -> InvalidProducerEpoch;
- a newer epoch must start at sequence 0 -> else OutOfOrderSequence;
- the same epoch must continue the sequence (last + 1, wrapping from 2**31-1 to 0) -> else
  OutOfOrderSequence; a producer with no state here (expired, or never seen) may start anywhere.
Replicated batches (followers, recovery) update the state without checks.

Transactions (KIP-98, Kafka's `ProducerStateManager` ongoing / unreplicated transactions): a
producer's first transactional batch opens its transaction at that batch's base offset; its
COMMIT or ABORT marker closes it (`CompletedTxn`, returned so the log can index an abort) and sets
the producer's epoch and coordinator epoch. A completed transaction stays "unreplicated" until the
high watermark passes its marker. The first unstable offset is the first offset of the oldest open
or unreplicated transaction; the partition's LSO is min(that, HW). Markers on the leader are
checked first (`check_marker`): an older producer epoch is InvalidProducerEpoch, an older
coordinator epoch TransactionCoordinatorFenced.

Transaction verification (KIP-890 part 1, Kafka's `VerificationGuard` / `VerificationStateEntry`):
before a leader asks the transaction coordinator whether a producer's transactional batch belongs
to its ongoing transaction, it takes the producer's guard (`maybe_start_verification`); the append
that follows the coordinator's yes carries that guard and is refused (InvalidTxnState) unless it is
still the producer's current guard. A marker for the producer, or the first batch of its
transaction, clears the guard, so a yes that raced an abort marker lets nothing in. A producer
with an ongoing transaction at that epoch needs no check (`has_ongoing_transaction`). Guards live
in memory only, as in Kafka.

Snapshots: `<offset>.snapshot` in the partition directory, Kafka's format v1: int16 version, uint32
CRC-32C of the rest, int32 count, then per producer int64 id, int16 epoch, int32 last sequence,
int64 last offset, int32 offset delta, int64 timestamp, int32 coordinator epoch, int64 current
transaction first offset (-1 when none). As Kafka, a snapshot keeps each producer's last batch
(last sequence and offset -1 for a producer known only by a marker); batches after the snapshot
offset are rebuilt from batch headers on load.
"""

from __future__ import annotations

import os
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from protocol.errors import ErrorCode
from storage.errors import StorageError

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_EPOCH = -1
NO_SEQUENCE = -1
SEQUENCE_LIMIT = 1 << 31
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = 1
_ENTRY = struct.Struct(">qhiqiqiq")
_HEADER = struct.Struct(">hIi")


class OutOfOrderSequence(StorageError):
    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(StorageError):
    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnState(StorageError):
    """A transactional batch that is not part of a verified ongoing transaction (KIP-890)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class VerificationGuard:
    """An opaque token: the identity of one verification of one producer's transaction."""

    __slots__ = ()


class CorruptSnapshot(StorageError):
    pass


class TransactionCoordinatorFenced(StorageError):
    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction its marker ended: offsets inclusive, `last_offset` is the marker's."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    epoch: int = NO_EPOCH
    batches: deque = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == SEQUENCE_LIMIT - 1)


def last_sequence(first_seq: int, last_offset_delta: int) -> int:
    return (first_seq + last_offset_delta) % SEQUENCE_LIMIT


class ProducerStateManager:
    def __init__(self, directory: Path | None = None, expiration_ms: int = 86400000):
        self.dir = directory
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0  # batches below this offset are reflected in the state
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction, oldest first
        self.unreplicated: dict[int, CompletedTxn] = {}  # first offset -> completed txn above the HW
        self.verifications: dict[int, VerificationGuard] = {}  # producer id -> its current guard (KIP-890)

    # ---- checks (client appends) ---------------------------------------------------------------
    def find_duplicate(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        entry = self.producers.get(producer_id)
        if entry is None or entry.epoch != epoch:
            return None
        return next((b for b in entry.batches if b.first_seq == first_seq and b.last_seq == last_seq), None)

    def check(self, producer_id: int, epoch: int, first_seq: int, pending: dict | None = None) -> None:
        """Validate a client batch (after duplicates are ruled out). `pending` carries the
        (epoch, last sequence) of earlier batches of the same request not yet applied."""
        entry = self.producers.get(producer_id)
        current_epoch = entry.epoch if entry else NO_EPOCH
        current_last = entry.last_seq if entry else NO_SEQUENCE
        if pending and producer_id in pending:
            current_epoch, current_last = pending[producer_id]
        if epoch < current_epoch:
            raise InvalidProducerEpoch(f"producer {producer_id}: epoch {epoch} is older than {current_epoch}")
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_EPOCH:
                raise OutOfOrderSequence(
                    f"producer {producer_id}: new epoch {epoch} must start at sequence 0, got {first_seq}"
                )
        elif current_epoch != NO_EPOCH and current_last != NO_SEQUENCE and not in_sequence(current_last, first_seq):
            raise OutOfOrderSequence(f"producer {producer_id}: sequence {first_seq} does not follow {current_last}")

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """A marker from a coordinator (WriteTxnMarkers) must not carry an older producer epoch
        (InvalidProducerEpoch) or an older coordinator epoch (TransactionCoordinatorFenced)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpoch(f"producer {producer_id}: marker epoch {epoch} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFenced(
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}"
            )

    # ---- transaction verification (KIP-890 part 1) -----------------------------------------------
    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer has a transaction open here at `epoch` (no verification needed)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == epoch

    def maybe_start_verification(self, producer_id: int) -> VerificationGuard:
        """The producer's current guard, made if it has none."""
        guard = self.verifications.get(producer_id)
        if guard is None:
            guard = self.verifications[producer_id] = VerificationGuard()
        return guard

    def check_verified(self, producer_id: int, epoch: int, guard: VerificationGuard | None) -> None:
        """Before appending a transactional batch with verification on: raises InvalidTxnState
        unless the producer's transaction is open here at `epoch` or `guard` is its current guard."""
        if self.has_ongoing_transaction(producer_id, epoch):
            return
        if guard is None or self.verifications.get(producer_id) is not guard:
            raise InvalidTxnState(
                f"producer {producer_id} epoch {epoch}: the record was not part of an ongoing transaction"
            )

    # ---- transactions and the LSO ----------------------------------------------------------------
    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction still open, or completed with its marker
        at or above `high_watermark`; None when there is none."""
        if not self.unreplicated and not self.ongoing:
            return None
        if self.unreplicated:
            for first, txn in list(self.unreplicated.items()):
                if txn.last_offset < high_watermark:
                    del self.unreplicated[first]
        oldest_open = next(iter(self.ongoing.values()), None)  # `ongoing` is in first-offset order
        candidates = [c for c in (oldest_open, min(self.unreplicated, default=None)) if c is not None]
        return min(candidates) if candidates else None

    def _complete_txn(self, header, marker) -> CompletedTxn:
        entry = self.producers.setdefault(header.producer_id, ProducerEntry())
        if header.producer_epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = header.producer_epoch
        first = entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else header.base_offset
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = max(entry.last_timestamp, header.max_timestamp)
        self.ongoing.pop(header.producer_id, None)
        self.verifications.pop(header.producer_id, None)
        completed = CompletedTxn(header.producer_id, first, header.base_offset, not marker.commit)
        self.unreplicated[first] = completed
        return completed

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is closed (what its aborted-transaction index entry records)."""
        return next(iter(self.ongoing.values()), completed.last_offset + 1)

    # ---- updates ---------------------------------------------------------------------------------
    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        """Record an appended batch (leader, follower or recovery)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self.producers.setdefault(producer_id, ProducerEntry())
        if epoch != entry.epoch:
            entry.batches.clear()
            entry.epoch = epoch
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def update_from_header(self, header, marker=None) -> CompletedTxn | None:
        """A batch's header (RecordBatch v2) as stored, offsets assigned; for a control batch its
        decoded marker (`protocol.control_records.Marker`, None for another control type).
        Returns the transaction a marker completed."""
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        if header.producer_id == NO_PRODUCER_ID:
            return None
        if header.is_control:
            return None if marker is None else self._complete_txn(header, marker)
        if header.base_sequence != NO_SEQUENCE:
            self.update(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        if header.is_transactional:
            entry = self.producers.setdefault(header.producer_id, ProducerEntry(epoch=header.producer_epoch))
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = header.base_offset
                self.ongoing[header.producer_id] = header.base_offset
                self.verifications.pop(header.producer_id, None)  # the transaction is open: verified
        return None

    def reset(self, offset: int = 0) -> None:
        self.producers.clear()
        self.verifications.clear()
        self.ongoing.clear()
        self.unreplicated.clear()
        self.map_end_offset = offset

    def remove_expired(self, now_ms: int | None = None) -> list[int]:
        """Drop producers idle for longer than `producer.id.expiration.ms`."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        expired = [
            pid
            for pid, e in self.producers.items()
            if now - e.last_timestamp > self.expiration_ms and e.current_txn_first_offset < 0
        ]
        for pid in expired:
            del self.producers[pid]
            self.verifications.pop(pid, None)
        return expired

    # ---- snapshots -------------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        """The snapshot file for `offset` (only for a manager with a directory)."""
        if self.dir is None:
            raise ValueError("this producer state has no directory")
        return self.dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def take_snapshot(self) -> Path | None:
        """Write `<map end offset>.snapshot` (atomically); returns its path."""
        if self.dir is None:
            return None
        entries = [
            _ENTRY.pack(
                pid,
                e.epoch,
                e.last_seq,
                e.batches[-1].last_offset if e.batches else -1,
                e.batches[-1].last_offset - e.batches[-1].first_offset if e.batches else 0,
                e.last_timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
            for pid, e in sorted(self.producers.items())
        ]
        body = struct.pack(">i", len(entries)) + b"".join(entries)
        data = struct.pack(">hI", _SNAPSHOT_VERSION, crc32c.crc32c(body)) + body
        path = self.snapshot_path(self.map_end_offset)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return path

    def snapshots(self) -> list[tuple[int, Path]]:
        if self.dir is None or not self.dir.exists():
            return []
        return sorted((int(p.stem), p) for p in self.dir.glob(f"*{SNAPSHOT_SUFFIX}") if p.stem.isdigit())

    def load_snapshot(self, path: Path) -> None:
        """Replace the state with a snapshot's; raises CorruptSnapshot."""
        data = path.read_bytes()
        if len(data) < _HEADER.size:
            raise CorruptSnapshot(f"{path}: {len(data)} bytes")
        version, crc, count = _HEADER.unpack_from(data)
        if (
            version != _SNAPSHOT_VERSION
            or crc32c.crc32c(data[6:]) != crc
            or len(data) != _HEADER.size + count * _ENTRY.size
        ):
            raise CorruptSnapshot(f"{path}: bad version, CRC or length")
        self.reset()
        ongoing = []
        for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first in _ENTRY.iter_unpack(
            data[_HEADER.size :]
        ):
            entry = self.producers[pid] = ProducerEntry(
                epoch=epoch, last_timestamp=ts, coordinator_epoch=coordinator_epoch, current_txn_first_offset=txn_first
            )
            if last_offset >= 0 and last_seq >= 0:
                entry.batches.append(
                    BatchMetadata((last_seq - delta) % SEQUENCE_LIMIT, last_seq, last_offset - delta, last_offset, ts)
                )
            if txn_first >= 0:
                ongoing.append((txn_first, pid))
        self.ongoing = {pid: first for first, pid in sorted(ongoing)}
        self.map_end_offset = int(path.stem)

    def delete_snapshots_from(self, offset: int) -> None:
        """Remove snapshots at or above `offset` (after truncation)."""
        for snap_offset, path in self.snapshots():
            if snap_offset >= offset:
                path.unlink(missing_ok=True)
