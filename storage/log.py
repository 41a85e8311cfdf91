"""The log of one partition replica: ordered segments in `<log.dir>/<topic>-<partition>/`.

Terms (Kafka's): LEO (log end offset, the next offset to assign), log start offset (the first
offset still readable), recovery point (every byte below it has been fsynced), leader epoch cache.
The high watermark is the caller's (the partition's); retention takes it as an argument and only
deletes segments wholly below it.

Invariants:
- segments are sorted by base offset; the last one is the active segment, the only one written;
- batches on disk are whole, CRC-valid and in increasing offset order (recovery enforces it after a
  crash); offsets may have gaps, which the log cleaner leaves and followers copy;
- LEO equals the active segment's next offset; log start offset <= LEO; recovery point <= LEO;
- a leader append stamps base offsets from LEO and the partition leader epoch without copying or
  decoding the records (both fields lie outside the CRC); a follower append keeps offsets as given.

Event loop budget (`make bench`, page cache, this project's 2-core machine): an append costs
~12 us for a 1 KiB batch, ~50 us for 16 KiB, ~2-3 ms for 1 MiB (the same as a raw write of those
bytes: the kernel copy); a 1 MiB read ~0.2 ms, plus 0.05-3 ms for the CRC/offset-chain check (per
batch, so small batches cost most). Decision: appends, reads and index lookups run inline on the
event loop; fsync (`flush_plan()` hands dup'd fds to `trio.to_thread`), segment deletion,
checkpoint writes and startup loading/recovery run in worker threads (see `LogManager`).
`flush.messages=1` (fsync on every append) is synchronous by request.

Not thread-safe: one owner at a time.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import crc32c

from protocol import record_batch as rb
from protocol.control_records import read_marker
from protocol.errors import CorruptRecordBatch
from protocol.record_filter import batch_payload, keyless_records
from protocol.record_validation import InvalidRecord, validate_client_batch
from storage.append_origin import AppendOrigin
from storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from storage.config import LONG_MAX, LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import (
    InvalidAppendOffset,
    InvalidTimestamp,
    KafkaStorageError,
    OffsetOutOfRange,
    RecordTooLarge,
)
from storage.producer_state import ProducerStateManager
from storage.producer_state_loader import rebuild_producer_state
from storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment, check_offset_order, fsync_directory
from storage.transaction_index import AbortedTxn

try:
    from minikafka_native import batches_valid as _native_batches_valid
except ImportError:  # pragma: no cover - make setup builds it; the reference below stands in
    _native_batches_valid = None

log = logging.getLogger(__name__)

_BATCH_LENGTH = struct.Struct(">i")  # a v2 batch header's, at byte 8
_PRODUCER_ID = struct.Struct(">q")  # at byte 43

DELETE_DIR_SUFFIX = "-delete"  # a partition directory being deleted (Kafka's `<tp>.<uuid>-delete`)


@dataclass(frozen=True)
class LogAppendInfo:
    """What an append wrote: offsets inclusive, timestamps in ms."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    batches: int
    records: int
    size: int  # bytes
    log_start_offset: int


@dataclass(frozen=True)
class LogReadInfo:
    """Whole batches read from one segment; `records` may start before `fetch_offset` (the batch
    that holds it), as Kafka's reads do."""

    fetch_offset: int
    records: bytes
    next_offset: int  # after the last batch returned; fetch_offset when none
    log_start_offset: int
    log_end_offset: int


@dataclass
class _Batches:
    """Batches of one append, parsed from their headers."""

    view: memoryview
    batches: list[tuple[int, rb.BatchHeader]]
    size: int
    records: int


class Log:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager | None = None,
    ):
        if not segments:
            raise ValueError("a log has at least one segment")
        self.dir = directory
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = min(recovery_point, self.log_end_offset)
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state or ProducerStateManager(directory, config.producer_id_expiration_ms)
        self._unflushed_records = 0
        self.last_flush_ms = int(time.time() * 1000)
        # Bumped by every change that rewrites or removes data below LEO other than retention at the
        # head (truncation, full truncation): the log cleaner swaps in nothing cleaned across one.
        self.truncations = 0

    @classmethod
    def create(cls, directory: Path, config: LogConfig, start_offset: int = 0) -> Log:
        """A new empty log (the directory is created)."""
        directory.mkdir(parents=True, exist_ok=True)
        segment = LogSegment(directory, start_offset, config, new=True)
        return cls(
            directory,
            config,
            [segment],
            log_start_offset=start_offset,
            recovery_point=start_offset,
            epoch_cache=LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT),
        )

    def update_config(self, config: LogConfig) -> None:
        """Run with `config` from now on (Kafka's `UnifiedLog.updateConfig`): a log loaded at
        startup, before its topic's overrides were known, gets them when its partition is
        hosted; segments roll, retention and the cleaner apply the new values from here."""
        if config == self.config:
            return
        self.config = config
        for segment in self._segments:
            segment.config = config

    # ---- state -------------------------------------------------------------------------------
    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def log_end_offset(self) -> int:
        active = self._segments[-1]
        leo = active._next_offset  # known after the first append or read; read here on every fetch
        return active.read_next_offset() if leo is None else leo

    @property
    def size(self) -> int:
        """Bytes in all segments."""
        return sum(s.size for s in self._segments)

    def _segment_for(self, offset: int) -> int:
        """Index of the segment whose range holds `offset` (floor by base offset)."""
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    # ---- appends -----------------------------------------------------------------------------
    def _parse(self, records, validate_records: bool) -> _Batches:
        view = memoryview(records).cast("B") if not isinstance(records, memoryview) else records
        batches, count = [], 0
        for position, header in rb.iter_batches(view):
            if header.size > self.config.max_message_bytes:
                raise RecordTooLarge(
                    f"batch of {header.size} bytes exceeds max.message.bytes {self.config.max_message_bytes}"
                )
            rb.validate_batch(view, position, header)
            if validate_records:
                validate_client_batch(view, position, header)
                if self.config.compact:
                    self._check_keys(view, position, header)
            batches.append((position, header))
            count += header.records_count
        if not batches:
            raise CorruptRecordBatch("an append needs at least one record batch")
        return _Batches(view, batches, len(view), count)

    def _check_keys(self, view, position: int, header: rb.BatchHeader) -> None:
        """A compacted topic refuses records without a key (Kafka's LogValidator.validateKey):
        InvalidRecord with a KIP-467 record error per keyless record."""
        if header.is_control:
            return
        keyless = keyless_records(batch_payload(view, position, header))
        if keyless:
            message = f"Compacted topic cannot accept message without key in topic partition {self.dir.name}."
            raise InvalidRecord(message, [(i, message) for i in keyless])

    def append_as_leader(
        self,
        records,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now_ms: int | None = None,
        verification: dict | None = None,
    ) -> LogAppendInfo:
        """Append batches as the leader: assign offsets from LEO, stamp `leader_epoch`, apply
        LogAppendTime if configured. Raises CorruptRecordBatch (CRC, count, magic), InvalidRecord
        (a CLIENT batch Kafka's LogValidator refuses, `protocol.record_validation`; a COORDINATOR's
        batches are trusted), RecordTooLarge; nothing of a refused append is written. A
        COORDINATOR append holding a control batch is transaction markers (WriteTxnMarkers): every
        batch must be one, checked against the producer state (InvalidProducerEpoch,
        TransactionCoordinatorFenced). `verification` (KIP-890; None: off): producer id -> the VerificationGuard
        its transactional batches were verified under; a transactional batch of a producer
        without an open transaction here and without its current guard raises InvalidTxnState.
        `records` is not modified or copied."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        prepared = self._prepare_leader(records, origin, verification, now)
        if isinstance(prepared, LogAppendInfo):
            return prepared
        return self._commit_leader([prepared], leader_epoch, now)[0]

    def append_group_as_leader(
        self, appends: list, leader_epoch: int, *, now_ms: int | None = None
    ) -> list[LogAppendInfo | Exception]:
        """Several CLIENT appends to this partition (each one Produce request's records, in
        arrival order) written as one (issue 48: the appends of one event-loop turn). Each is
        checked on its own, as `append_as_leader` checks it; a refused one gets its exception in
        its place and the others are still written. The accepted ones take consecutive offsets in
        their order and reach the segment in one write. -> per append, its LogAppendInfo (for a
        retried idempotent batch, its original offsets) or the exception `append_as_leader` would
        have raised. The outcomes are those of the same appends made one by one: a group holds
        at most one append per producer id and only single-batch appends (any other is written
        alone, in its turn), so each producer-state check sees everything written before it."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        outcomes: list = [None] * len(appends)
        group: list[tuple[int, _Batches]] = []
        producers: set[int] = set()
        size = 0
        limit = self.config.segment_bytes

        def commit() -> None:
            nonlocal size
            if not group:
                return
            try:
                infos: list = self._commit_leader([parsed for _, parsed in group], leader_epoch, now)
            except Exception as e:  # the write failed (KafkaStorageError): nothing of the group is written
                infos = [e] * len(group)
            for (index, _), info in zip(group, infos):
                outcomes[index] = info
            group.clear()
            producers.clear()
            size = 0

        for index, records in enumerate(appends):
            single, producer_id = _single_batch(records)
            if not single or producer_id in producers or size + len(records) > limit:
                commit()
            try:
                prepared = self._prepare_leader(records, AppendOrigin.CLIENT, None, now)
            except Exception as e:  # refused: nothing of it is written
                outcomes[index] = e
                continue
            if isinstance(prepared, LogAppendInfo):  # a retried batch: answered, not written again
                outcomes[index] = prepared
                continue
            group.append((index, prepared))
            size += prepared.size
            if producer_id >= 0:
                producers.add(producer_id)
            if not single:
                commit()
        commit()
        return outcomes

    def _prepare_leader(
        self, records, origin: AppendOrigin, verification: dict | None, now: int
    ) -> _Batches | LogAppendInfo:
        """An append's checks, with nothing written: its parsed batches, or the LogAppendInfo of
        the batch it retries. Raises what `append_as_leader` documents."""
        parsed = self._parse(records, validate_records=origin is AppendOrigin.CLIENT)
        if origin is AppendOrigin.COORDINATOR and any(header.is_control for _, header in parsed.batches):
            self._check_markers(parsed)
        duplicate = self._check_producers(parsed)
        if duplicate is not None:
            return duplicate
        if verification is not None:
            for _, header in parsed.batches:
                if header.is_transactional and not header.is_control:
                    self.producer_state.check_verified(
                        header.producer_id, header.producer_epoch, verification.get(header.producer_id)
                    )
        self._check_timestamps(parsed, now)
        return self._compress_as_configured(parsed)

    def _commit_leader(self, appends: list[_Batches], leader_epoch: int, now: int) -> list[LogAppendInfo]:
        """Checked appends -> offsets assigned from LEO, `leader_epoch` stamped, one write to the
        active segment, the producer state updated; a LogAppendInfo each. Raises
        KafkaStorageError with nothing written."""
        append_time = self.config.message_timestamp_type == "LogAppendTime"
        offset = first = self.log_end_offset
        buffers: list = []
        max_ts, max_ts_offset = -1, first
        spans = []  # per append: (first offset, max timestamp, its offset)
        for parsed in appends:
            start, own_ts, own_ts_offset = offset, -1, offset
            view = parsed.view
            for position, header in parsed.batches:
                prefix = bytearray(view[position : position + rb.HEADER_SIZE])
                rb.stamp_batch(prefix, 0, offset, leader_epoch)
                if append_time:
                    self._set_append_time(prefix, view[position + rb.HEADER_SIZE : position + header.size], now)
                buffers += [prefix, view[position + rb.HEADER_SIZE : position + header.size]]
                ts = now if append_time else header.max_timestamp
                if ts > own_ts:
                    own_ts, own_ts_offset = ts, offset + header.last_offset_delta
                offset += header.last_offset_delta + 1
            spans.append((start, own_ts, own_ts_offset))
            if own_ts > max_ts:
                max_ts, max_ts_offset = own_ts, own_ts_offset
        if leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(leader_epoch, first)
        if len(appends) == 1:
            whole = appends[0]
        else:
            whole = _Batches(appends[0].view, [], sum(a.size for a in appends), sum(a.records for a in appends))
        self._write(buffers, whole, first, offset - 1, max_ts, max_ts_offset)
        infos = []
        for parsed, (start, own_ts, own_ts_offset) in zip(appends, spans):
            base = start
            for position, header in parsed.batches:
                self._update_producer_state(parsed, position, rb.with_base_offset(header, base))
                base += header.last_offset_delta + 1
            infos.append(
                LogAppendInfo(
                    start,
                    base - 1,
                    own_ts,
                    own_ts_offset,
                    now if append_time else -1,
                    len(parsed.batches),
                    parsed.records,
                    parsed.size,
                    self.log_start_offset,
                )
            )
        return infos

    def _check_markers(self, parsed: _Batches) -> None:
        for position, header in parsed.batches:
            marker = read_marker(parsed.view, position, header) if header.is_control else None
            if marker is None:
                raise CorruptRecordBatch("a WriteTxnMarkers append holds only transaction markers")
            self.producer_state.check_marker(header.producer_id, header.producer_epoch, marker.coordinator_epoch)

    def _update_producer_state(self, parsed: _Batches, position: int, header: rb.BatchHeader) -> None:
        """Producer state after a batch was written; an ABORT marker is indexed in the active
        segment (where it was written)."""
        marker = None
        if header.is_control and header.producer_id >= 0:
            try:
                marker = read_marker(parsed.view, position, header)
            except CorruptRecordBatch as e:
                log.warning("%s: %s", self.dir.name, e)
        completed = self.producer_state.update_from_header(header, marker)
        if completed is not None and completed.is_aborted:
            self.active_segment.txn_index.append(
                AbortedTxn(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    self.producer_state.last_stable_offset_after(completed),
                )
            )

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in [fetch_offset, upper_bound) (Kafka's
        `collectAbortedTransactions`): what a read_committed Fetch returns beside the records."""
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_for(fetch_offset) :]:
            entries, complete = segment.txn_index.overlapping(fetch_offset, upper_bound)
            found += entries
            if complete:
                break
        return found

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: the first offset of the oldest open (or not yet replicated) transaction, never
        above `high_watermark`."""
        unstable = self.producer_state.first_unstable_offset(high_watermark)
        return high_watermark if unstable is None else min(unstable, high_watermark)

    def _check_producers(self, parsed: _Batches) -> LogAppendInfo | None:
        """Idempotent producers: a retried batch is answered with its original offsets (nothing is
        appended); otherwise each batch's epoch and sequence must be valid (OutOfOrderSequence,
        InvalidProducerEpoch)."""
        pending: dict[int, tuple[int, int]] = {}
        for _, header in parsed.batches:
            if header.producer_id < 0 or header.base_sequence < 0 or header.is_control:
                continue
            duplicate = self.producer_state.find_duplicate(
                header.producer_id, header.producer_epoch, header.base_sequence, header.last_sequence
            )
            if duplicate is not None:
                return LogAppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.timestamp,
                    duplicate.last_offset,
                    -1,
                    0,
                    0,
                    0,
                    self.log_start_offset,
                )
            self.producer_state.check(header.producer_id, header.producer_epoch, header.base_sequence, pending)
            pending[header.producer_id] = (header.producer_epoch, header.last_sequence)
        return None

    def _check_timestamps(self, parsed: _Batches, now: int) -> None:
        """message.timestamp.before.max.ms / after.max.ms (Kafka's LogValidator.validateTimestamp):
        every CreateTime record timestamp must lie in [now - before, now + after]; raises
        InvalidTimestamp. Records are decoded only when a bound is configured."""
        before, after = self.config.message_timestamp_before_max_ms, self.config.message_timestamp_after_max_ms
        if self.config.message_timestamp_type != "CreateTime" or (before == after == LONG_MAX):
            return
        for position, header in parsed.batches:
            if header.is_control:
                continue
            for record in rb.decode_records(parsed.view, position, header):
                if record.timestamp >= 0 and not now - before <= record.timestamp <= now + after:
                    raise InvalidTimestamp(
                        f"timestamp {record.timestamp} of offset delta {record.offset - header.base_offset} "
                        f"is out of range: it must be within [{now - before}, {now + after}] "
                        f"(message.timestamp.before.max.ms / after.max.ms)"
                    )

    def _compress_as_configured(self, parsed: _Batches) -> _Batches:
        """compression.type: a codec other than `producer` recompresses every data batch written
        with another codec (Kafka's LogValidator); `producer` keeps the batches as sent."""
        target = self.config.compression_type
        if target == "producer":
            return parsed
        codec = rb.NONE if target == "uncompressed" else rb.CODECS[target]
        if all(header.compression == codec or header.is_control for _, header in parsed.batches):
            return parsed
        level = {
            rb.GZIP: self.config.compression_gzip_level,
            rb.LZ4: self.config.compression_lz4_level,
            rb.ZSTD: self.config.compression_zstd_level,
        }.get(codec)
        out = bytearray()
        for position, header in parsed.batches:
            if header.compression == codec or header.is_control:
                out += parsed.view[position : position + header.size]
            else:
                out += rb.recompress(parsed.view, position, header, codec, level)
        return self._parse(out, validate_records=False)

    @staticmethod
    def _set_append_time(prefix: bytearray, rest, now: int) -> None:
        attributes = int.from_bytes(prefix[rb.CRC_START : rb.CRC_START + 2], "big", signed=True)
        prefix[rb.CRC_START : rb.CRC_START + 2] = (attributes | rb.TIMESTAMP_TYPE_BIT).to_bytes(2, "big", signed=True)
        prefix[35:43] = now.to_bytes(8, "big", signed=True)
        crc = crc32c.crc32c(rest, crc32c.crc32c(bytes(prefix[rb.CRC_START :])))
        prefix[17:21] = crc.to_bytes(4, "big")

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append batches replicated from the leader, offsets and epochs as given. Each batch must
        start at or after LEO and after the previous one (gaps are a compacted leader's, kept as
        they are); InvalidAppendOffset otherwise; CRCs are checked."""
        parsed = self._parse(records, validate_records=False)
        expected = self.log_end_offset
        first = parsed.batches[0][1].base_offset
        max_ts, max_ts_offset = -1, first
        for index, (_, header) in enumerate(parsed.batches):
            if header.base_offset < expected:
                bounds = (header.base_offset, header.last_offset) if index == 0 else (None, None)
                raise InvalidAppendOffset(f"batch at offset {header.base_offset}, expected >= {expected}", *bounds)
            if header.partition_leader_epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            expected = header.next_offset
        self._write([parsed.view], parsed, first, expected - 1, max_ts, max_ts_offset)
        for position, header in parsed.batches:
            self._update_producer_state(parsed, position, header)
        return LogAppendInfo(
            first,
            expected - 1,
            max_ts,
            max_ts_offset,
            -1,
            len(parsed.batches),
            parsed.records,
            parsed.size,
            self.log_start_offset,
        )

    def _replace_empty_active(self, base_offset: int) -> None:
        """Recreate the empty active segment at `base_offset`; an otherwise empty log then starts
        there (there is nothing below it to read)."""
        old = self._segments.pop()
        self._bases.pop()
        old.delete()
        self._add_segment(LogSegment(self.dir, base_offset, self.config, new=True))
        if len(self._segments) == 1:
            self.log_start_offset = self.recovery_point = base_offset

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def _write(
        self, buffers: list, parsed: _Batches, first_offset: int, last_offset: int, max_ts: int, max_ts_offset: int
    ) -> None:
        """Write an append to the active segment (rolling first when due). An I/O error (a full
        disk, EMFILE, EIO) raises StorageError, answered KAFKA_STORAGE_ERROR as Kafka does; the
        segment keeps only whole appends."""
        try:
            self._write_segment(buffers, parsed, first_offset, last_offset, max_ts, max_ts_offset)
        except OSError as e:
            log.error("%s: write of offsets %d-%d failed: %s", self.dir, first_offset, last_offset, e)
            raise KafkaStorageError(f"{self.dir.name}: write failed: {e}", self.dir.parent) from e

    def _write_segment(
        self, buffers: list, parsed: _Batches, first_offset: int, last_offset: int, max_ts: int, max_ts_offset: int
    ) -> None:
        if self.active_segment.should_roll(parsed.size, max_ts, last_offset):
            self.roll(first_offset)
        # else an empty active segment keeps its base offset even when the first batch starts
        # later (a compacted leader's gap): the log start offset stays where the leader has it
        self.active_segment.append(buffers, parsed.size, last_offset, max_ts, max_ts_offset)
        self._unflushed_records += parsed.records
        if self._unflushed_records >= self.config.flush_messages:
            self.flush()

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at `base_offset` (default LEO); the old one's indexes are
        trimmed. Rolling an empty active segment at the same offset is a no-op."""
        base = self.log_end_offset if base_offset is None else base_offset
        active = self.active_segment
        if active.size == 0:
            if active.base_offset == base:
                return active
            self._replace_empty_active(base)
            return self.active_segment
        active.on_become_inactive()
        self._add_segment(LogSegment(self.dir, base, self.config, new=True))
        self.producer_state.take_snapshot()
        return self.active_segment

    # ---- reads -------------------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_batch: bool = True,
        verify_crc: bool = True,
    ) -> LogReadInfo:
        """Whole batches from the one holding `fetch_offset`, from one segment, at most
        `max_bytes` (but at least one batch with `min_one_batch`), excluding batches whose last
        offset is >= `max_offset` (the high watermark for consumers). Raises OffsetOutOfRange
        outside [log start offset, LEO]; with verify_crc a batch that fails its CRC or breaks the
        offset chain raises StorageError instead of being served."""
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRange(f"offset {fetch_offset} is outside [{self.log_start_offset}, {leo}]")
        data, next_offset = b"", fetch_offset
        if fetch_offset < leo and (max_offset is None or fetch_offset < max_offset):
            first = self._segment_for(fetch_offset)
            if first == len(self._segments) - 1:  # the active segment: its last appends are in memory
                tail = self._segments[first].read_tail(fetch_offset, max_bytes, max_offset)
                if tail is not None:
                    return LogReadInfo(fetch_offset, tail[0], tail[1], self.log_start_offset, leo)
            for i, segment in enumerate(self._segments[first:], first):
                try:
                    found = segment.read(fetch_offset, max_bytes, max_offset, min_one_batch)
                except CorruptRecordBatch as e:
                    raise KafkaStorageError(f"{segment.log_path}: {e}", self.dir.parent) from None
                if found is not None:
                    data, next_offset = found[1], found[2]
                    if verify_crc:
                        next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
                        self._verify(segment, found[0], data, fetch_offset, next_base)
                    break
        return LogReadInfo(fetch_offset, data, next_offset, self.log_start_offset, leo)

    @staticmethod
    def _verify(segment: LogSegment, position: int, data: bytes, fetch_offset: int, next_base: int | None) -> None:
        """CRC of every batch read, and the offset order: the first batch ends at or after
        `fetch_offset`, the others follow it (gaps allowed), all below the next segment. Raises
        KafkaStorageError (UnsupportedMagic for a batch that is not v2). Checked compiled
        (`minikafka_native.batches_valid`, the same rules in one pass); a read it refuses, or
        every read without it, goes through `verify_reference`, which says what is wrong."""
        if _native_batches_valid is not None and _native_batches_valid(
            data, fetch_offset, segment.base_offset, next_base
        ):
            return
        Log.verify_reference(segment, position, data, fetch_offset, next_base)

    @staticmethod
    def verify_reference(
        segment: LogSegment, position: int, data: bytes, fetch_offset: int, next_base: int | None
    ) -> None:
        """`_verify` in Python: the definition of its rules, and its errors."""
        try:
            expected = None
            for pos, header in rb.iter_batches(data):
                if expected is None:
                    if header.last_offset < fetch_offset or header.base_offset < segment.base_offset:
                        raise CorruptRecordBatch(
                            f"batch {header.base_offset}..{header.last_offset} does not hold offset {fetch_offset}"
                        )
                    expected = header.base_offset
                check_offset_order(header, expected, segment.log_path, position + pos, next_base)
                rb.validate_batch(data, pos, header)
                expected = header.next_offset
        except CorruptRecordBatch as e:
            raise KafkaStorageError(
                f"{segment.log_path} near position {position}: {e}", segment.log_path.parent.parent
            ) from None

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None."""
        for segment in self._segments:
            if segment.max_timestamp >= timestamp or segment is self.active_segment:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the log's largest timestamp
        (ListOffsets MAX_TIMESTAMP, KIP-734), or None for an empty log."""
        best = max(self._segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)

    # ---- truncation and retention ------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or above `offset` (a batch holding it goes whole). Returns
        whether anything was removed."""
        if offset < 0:
            raise ValueError(f"cannot truncate to {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.truncations += 1
        # Segments starting at or above `offset` go; the one before becomes active again, so LEO is
        # the offset after the last batch kept even across a follower's offset gap.
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._bases.pop()
            self._segments.pop().delete()
        self.active_segment.truncate_to(offset)
        if len(self._segments) > 1 and self.active_segment.size == 0:
            self._bases.pop()
            self._segments.pop().delete()
        leo = self.log_end_offset
        self.recovery_point = min(self.recovery_point, leo)
        self.epoch_cache.truncate_from_end(leo)
        rebuild_producer_state(self)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at `offset` (log start offset = LEO = offset)."""
        self.truncations += 1
        for segment in self._segments:
            segment.delete()
        self._segments, self._bases = [], []
        self._add_segment(LogSegment(self.dir, offset, self.config, new=True))
        self.log_start_offset = self.recovery_point = offset
        self.epoch_cache.clear()
        self.producer_state.reset(offset)
        self.producer_state.delete_snapshots_from(0)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset (DeleteRecords, retention); never above the high watermark
        the caller passes nor above LEO."""
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = min(offset, self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        return True

    def deletable_segments(self, high_watermark: int, now_ms: int | None = None) -> list[LogSegment]:
        """Segments retention would delete now: by log start offset, and with `cleanup.policy`
        delete by `retention.ms` and `retention.bytes`, oldest first, never the active one nor any not wholly below the HW."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        candidates = []
        for segment, next_base in zip(self._segments, self._bases[1:]):
            if next_base > high_watermark:
                break
            candidates.append((segment, next_base))
        doomed = []
        delete = "delete" in self.config.cleanup_policy  # compact-only logs keep every segment
        excess = self.size - self.config.retention_bytes if delete and self.config.retention_bytes >= 0 else -1
        for segment, next_base in candidates:
            by_start = next_base <= self.log_start_offset
            by_time = (
                delete
                and self.config.retention_ms >= 0
                and now - segment.largest_timestamp() > self.config.retention_ms
            )
            by_size = excess >= segment.size
            if not (by_start or by_time or by_size):
                break
            doomed.append(segment)
            excess -= segment.size
        return doomed

    def detach_old_segments(self, high_watermark: int, now_ms: int | None = None) -> list[LogSegment]:
        """Apply retention to the log's state: remove the deletable segments from it and raise the
        log start offset. The caller deletes the returned segments' files (`LogSegment.delete`),
        which may run in a worker thread since nothing else references them."""
        doomed = self.deletable_segments(high_watermark, now_ms)
        for segment in doomed:
            self._segments.remove(segment)
            self._bases.remove(segment.base_offset)
        if doomed:
            self.maybe_increment_log_start_offset(self._segments[0].base_offset)
        return doomed

    # ---- the log cleaner's swap ---------------------------------------------------------------
    def replace_segments(self, cleaned_base: int, replaced: list[int], after_step=None) -> list[Path]:
        """Swap the cleaned segment `<cleaned_base>.log.cleaned` (with its indexes) in for the
        segments whose base offsets are `replaced` (consecutive, not the active one, the first at
        `cleaned_base`), in Kafka's crash-safe order (`LocalLog.replaceSegments`): rename it
        `.swap`; replace the segments in memory; rename the old files `.deleted`; rename the swap
        to its final name. A crash between any two steps leaves files `log_loader` completes or
        discards. `after_step(name)` is called after each step (tests kill the process there).
        Returns the `.deleted` paths for `unlink_all` (a worker thread may remove them). Raises
        ValueError when the segments are no longer the log's (nothing is changed)."""
        at = self._bases.index(cleaned_base) if cleaned_base in self._bases else -1
        if at < 0 or self._bases[at : at + len(replaced)] != list(replaced) or at + len(replaced) >= len(self._bases):
            raise ValueError(f"{self.dir.name}: segments {replaced} are not inactive segments of the log")
        step = after_step or (lambda name: None)
        old = self._segments[at : at + len(replaced)]
        new = LogSegment(self.dir, cleaned_base, self.config, suffix=CLEANED_SUFFIX)
        # the cleaner keeps every transactional record and marker: the aborted transactions stay
        new.txn_index.reset([txn for segment in old for txn in segment.txn_index.entries])
        new.txn_index.flush()
        new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        step("swap")
        self._segments[at : at + len(replaced)] = [new]
        self._bases[at : at + len(replaced)] = [cleaned_base]
        deleted = [path for segment in old for path in segment.mark_deleted()]
        step("deleted")
        new.change_suffix(SWAP_SUFFIX, "")
        fsync_directory(self.dir)
        step("done")
        return deleted

    # ---- durability and lifecycle ------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment holding data at or above the recovery point; recovery point = LEO."""
        leo = self.log_end_offset
        for segment in self._segments[self._segment_for(self.recovery_point) :]:
            segment.flush()
        self._mark_flushed(leo)

    def flush_plan(self) -> tuple[list[int], int]:
        """(dup'd fds to fsync, offset they make durable): run `os.fsync` + `os.close` on the fds
        in a worker thread, then call `complete_flush(offset)` on the owner's thread."""
        fds = [fd for segment in self._segments[self._segment_for(self.recovery_point) :] for fd in segment.dup_fds()]
        return fds, self.log_end_offset

    def complete_flush(self, offset: int) -> None:
        self._mark_flushed(offset)

    def _mark_flushed(self, offset: int) -> None:
        self.recovery_point = max(self.recovery_point, min(offset, self.log_end_offset))
        self._unflushed_records = 0
        self.last_flush_ms = int(time.time() * 1000)

    def close(self) -> None:
        """Snapshot the producer state, close every segment (indexes trimmed). Data not flushed
        stays in the page cache."""
        if self.producer_state.producers:
            self.producer_state.map_end_offset = self.log_end_offset
            self.producer_state.take_snapshot()
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Remove the whole partition directory. It is first renamed `<dir>.<uuid>-delete` (as
        Kafka does), so nothing still holding the old path (a cleaning in a worker process) can
        create files there; the loader removes a `-delete` directory a crash left behind."""
        self.close()
        doomed = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(self.dir, doomed)
        except OSError:
            doomed = self.dir
        shutil.rmtree(doomed, ignore_errors=True)


def fsync_fds(fds: list[int]) -> None:
    """fsync and close fds from `Log.flush_plan` (runs in a worker thread)."""
    for fd in fds:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _single_batch(records) -> tuple[bool, int]:
    """(whether `records` is exactly one v2 batch by its length field, its producer id or -1),
    from the header's bytes alone (nothing validated: the append's checks come after)."""
    if records is None or len(records) < rb.HEADER_SIZE:
        return False, -1
    (batch_length,) = _BATCH_LENGTH.unpack_from(records, 8)
    (producer_id,) = _PRODUCER_ID.unpack_from(records, 43)
    return batch_length + rb.LOG_OVERHEAD == len(records), producer_id
