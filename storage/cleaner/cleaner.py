"""One cleaning of one log (Kafka's `Cleaner.doClean`), as plain file work for a worker process.

Input (`CleanTask`, picklable): the partition directory, its `LogConfig`, the segments below the
first uncleanable offset (base offset and size in bytes of each, immutable while the broker keeps
them: only the active segment is written), the first dirty offset, the offset map's capacity, the
last offset of each active producer's last batch, the delete horizon and an I/O rate limit.

Steps:
1. Build the offset map (key -> latest offset) over the dirty section, segment by segment from the
   first dirty offset, batch by batch until the next batch would overflow the map; the cleaning
   ends at the offset after the last batch added (`CleanResult.end_offset`, the next first dirty
   offset). Keyless records, control batches and batches of aborted transactions are not mapped.
2. Group the segments from the first one up to that end (Kafka's `groupSegmentsBySize`: at most
   `segment.bytes` and `segment.index.bytes` per group, offsets within an int32 of the group's base).
3. Rewrite each group into one segment named after its first segment's base offset with suffix
   `.cleaned` (log and indexes), keeping a record unless the map holds a later offset for its key,
   it has no key, or it is a tombstone in a segment last modified before the delete horizon
   (`delete.retention.ms` before the last modification of the clean section, Kafka's legacy horizon).
   Whole batches are copied as they are when every record stays; otherwise the batch is rebuilt
   (`protocol.record_filter.rebuild_batch`) or, when empty, dropped, except an active producer's
   last batch, kept empty so its sequence state survives. Batches of aborted transactions (their
   producer's aborted range in the `.txnindex` entries the task carries) are dropped the same way,
   as Kafka's cleaner discards them; transaction markers are kept. The cleaned files are fsynced and take
   the last modification time of the group's last segment (Kafka's `cleaned.lastModified`).

The broker swaps the cleaned segments in (`Log.replace_segments`) if the log still holds the
segments the task named. Errors: CorruptRecordBatch (a damaged segment: nothing is swapped),
OSError; a partly written `.cleaned` file is removed by the caller or by recovery.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch
from protocol.record_filter import batch_payload, rebuild_batch, record_columns
from storage.cleaner.offset_map import OffsetMap
from storage.config import INT_MAX, LogConfig
from storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
    fsync_directory,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SegmentInfo:
    base_offset: int
    size: int  # bytes of the .log


@dataclass(frozen=True)
class CleanTask:
    dir: str
    config: LogConfig
    segments: tuple[SegmentInfo, ...]  # from the log's first segment up to the first uncleanable offset
    first_dirty_offset: int
    uncleanable_offset: int  # the end of the last segment given (the next segment's base offset)
    map_capacity: int  # entries (offset_map.capacity_for)
    producer_last_offsets: dict[int, int] = field(default_factory=dict)  # producer id -> last batch's last offset
    io_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second (this worker's share)
    now_ms: int = 0
    read_buffer_size: int = 512 * 1024  # log.cleaner.io.buffer.size: bytes per read of a segment
    owner_pid: int = 0  # the broker's pid: a worker whose broker died stops at once (0: no check)
    aborted_txns: tuple[tuple[int, int, int], ...] = ()  # (producer id, first offset, marker offset) of aborted txns


@dataclass
class CleanerStats:
    bytes_read: int = 0  # of the segments rewritten (the map pass reads the dirty ones again)
    bytes_written: int = 0
    map_bytes_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_entries: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class CleanResult:
    end_offset: int  # the next first dirty offset
    groups: tuple[tuple[int, tuple[int, ...]], ...]  # (cleaned segment's base offset, base offsets it replaces)
    stats: CleanerStats


class Throttler:
    """Kafka's `Throttler`: sleeps so that bytes pass at most at `rate` per second. Also where a
    worker notices that the broker that started it is gone (a kill -9 leaves workers orphaned):
    it exits before writing more, so a restarted broker never shares a `.cleaned` file with it."""

    def __init__(self, rate: float, owner_pid: int = 0):
        self.rate, self.start, self.bytes = rate, time.monotonic(), 0
        self.owner_pid = owner_pid

    def maybe_throttle(self, n: int) -> None:
        if self.owner_pid and os.getppid() != self.owner_pid:
            os._exit(1)
        if self.rate == float("inf"):
            return
        self.bytes += n
        ahead = self.bytes / self.rate - (time.monotonic() - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


def read_batches(path: Path, size: int, throttler: Throttler | None = None, chunk: int = 512 * 1024):
    """(header, batch bytes) of each batch of a segment file up to `size` bytes, read `chunk`
    bytes at a time (a larger batch in one read). Checks each batch's CRC; raises
    CorruptRecordBatch."""
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = 0
        while pos < size:
            data = os.pread(fd, min(chunk, size - pos), pos)
            view, used = memoryview(data), 0
            while used + rb.LOG_OVERHEAD <= len(view):
                length = int.from_bytes(view[used + 8 : used + 12], "big", signed=True) + rb.LOG_OVERHEAD
                if length < rb.HEADER_SIZE or pos + used + length > size:
                    raise CorruptRecordBatch(f"{path}: batch of {length} bytes at position {pos + used}")
                if used + length > len(view):
                    break
                header = rb.read_header(view, used)
                rb.validate_batch(view, used, header)
                yield header, view[used : used + length]
                used += length
            if used == 0:  # one batch larger than a chunk
                length = int.from_bytes(os.pread(fd, 4, pos + 8), "big", signed=True) + rb.LOG_OVERHEAD
                data = os.pread(fd, length, pos)
                header = rb.read_header(data, 0)
                rb.validate_batch(data, 0, header)
                yield header, memoryview(data)
                used = length
            if throttler is not None:
                throttler.maybe_throttle(used)
            pos += used
    finally:
        os.close(fd)


def remove_cleaned(directory: Path, base_offset: int) -> None:
    """Remove the `.cleaned` files (log and indexes) of the cleaned segment at `base_offset`: a
    cleaning that failed, or one whose result is not swapped in."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (directory / (file_name(base_offset, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)


class AbortedRanges:
    """Which transactional batches belong to an aborted transaction: their producer's aborted
    range (first offset to marker offset) covers their base offset."""

    def __init__(self, txns: tuple[tuple[int, int, int], ...]):
        self._firsts: dict[int, list[int]] = {}
        self._lasts: dict[int, list[int]] = {}
        for pid, first, last in sorted(txns, key=lambda t: t[1]):
            self._firsts.setdefault(pid, []).append(first)
            self._lasts.setdefault(pid, []).append(last)

    def covers(self, header: rb.BatchHeader) -> bool:
        if not header.is_transactional or header.is_control or header.producer_id not in self._firsts:
            return False
        i = bisect.bisect_right(self._firsts[header.producer_id], header.base_offset) - 1
        return i >= 0 and self._lasts[header.producer_id][i] >= header.base_offset


def _log_path(directory: Path, base: int) -> Path:
    return directory / file_name(base, LOG_SUFFIX)


def build_offset_map(task: CleanTask, offset_map: OffsetMap, stats: CleanerStats, throttler: Throttler) -> int:
    """Step 1: map the dirty section; returns the end offset (exclusive) of what was mapped."""
    directory = Path(task.dir)
    end = task.first_dirty_offset
    aborted = AbortedRanges(task.aborted_txns)
    bounds = [s.base_offset for s in task.segments[1:]] + [task.uncleanable_offset]
    for segment, next_base in zip(task.segments, bounds):
        if next_base <= task.first_dirty_offset:
            continue  # wholly clean
        for header, batch in read_batches(
            _log_path(directory, segment.base_offset), segment.size, throttler, task.read_buffer_size
        ):
            stats.map_bytes_read += header.size
            if header.last_offset < task.first_dirty_offset:
                continue
            if header.is_control or header.records_count == 0 or aborted.covers(header):
                end = header.next_offset
                continue
            if header.records_count > offset_map.room():
                if len(offset_map) == 0:
                    raise OverflowError(
                        f"{task.dir}: a batch of {header.records_count} records does not fit the offset map of "
                        f"{offset_map.capacity} keys; raise log.cleaner.dedupe.buffer.size"
                    )
                stats.map_entries = len(offset_map)
                return end
            try:
                offset_map.put_batch(batch_payload(batch, 0, header), header.base_offset)
            except ValueError as e:
                raise CorruptRecordBatch(f"batch at offset {header.base_offset}: {e}") from None
            end = header.next_offset
        end = max(end, next_base)
    stats.map_entries = len(offset_map)
    return end


def group_segments(directory: Path, segments: list[SegmentInfo], config: LogConfig) -> list[list[SegmentInfo]]:
    """Step 2 (Kafka's `groupSegmentsBySize`): consecutive segments whose total log bytes stay
    within `segment.bytes`, index bytes within `segment.index.bytes`, and offsets within an int32
    of the group's base offset (the last offset bound is the next segment's base)."""
    groups: list[list[SegmentInfo]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size, index = segments[i].size, _index_size(directory, segments[i])
        while i + 1 < len(segments):
            nxt = segments[i + 1]
            after = segments[i + 2].base_offset if i + 2 < len(segments) else nxt.base_offset
            nxt_index = _index_size(directory, nxt)
            if (
                size + nxt.size > config.segment_bytes
                or index + nxt_index > config.segment_index_bytes
                or after - 1 - group[0].base_offset > INT_MAX
            ):
                break
            group.append(nxt)
            size, index = size + nxt.size, index + nxt_index
            i += 1
        groups.append(group)
        i += 1
    return groups


def _index_size(directory: Path, segment: SegmentInfo) -> int:
    try:
        return os.stat(directory / file_name(segment.base_offset, INDEX_SUFFIX)).st_size
    except FileNotFoundError:
        return 0


def _keep_batch(
    header: rb.BatchHeader,
    batch: memoryview,
    offset_map: OffsetMap,
    retain_deletes: bool,
    producer_last_offsets: dict[int, int],
    stats: CleanerStats,
    aborted: AbortedRanges,
) -> bytes | memoryview | None:
    """The batch to write for `batch` (itself, rebuilt, or empty), or None to drop it."""
    if header.is_control:
        return batch  # transaction markers stay
    stats.records_read += header.records_count
    payload = batch_payload(batch, 0, header)
    if aborted.covers(header):
        if producer_last_offsets.get(header.producer_id) == header.last_offset:
            return rebuild_batch(header, payload, record_columns(payload), [])
        return None
    # kept: a key (Kafka's cleaner drops keyless records, "invalid message"), no later record of
    # it in the map, and not a tombstone past the delete horizon
    try:
        kept = offset_map.kept(payload, header.base_offset, retain_deletes)
    except ValueError as e:
        raise CorruptRecordBatch(f"batch at offset {header.base_offset}: {e}") from None
    if kept is None:
        stats.records_kept += header.records_count
        return batch
    stats.records_kept += len(kept)
    if kept or producer_last_offsets.get(header.producer_id) == header.last_offset:
        return rebuild_batch(header, payload, record_columns(payload), kept)
    return None


def _clean_group(
    task: CleanTask,
    group: list[SegmentInfo],
    offset_map: OffsetMap,
    delete_horizon_ms: int,
    stats: CleanerStats,
    throttler: Throttler,
) -> None:
    directory = Path(task.dir)
    aborted = AbortedRanges(task.aborted_txns)
    cleaned = LogSegment(directory, group[0].base_offset, task.config, new=True, suffix=CLEANED_SUFFIX)
    try:
        pending: list = []
        pending_bytes, last_offset, max_ts, max_ts_offset = 0, -1, -1, -1

        def flush_pending():
            nonlocal pending, pending_bytes
            if pending:
                cleaned.append(pending, pending_bytes, last_offset, max_ts, max_ts_offset)
                stats.bytes_written += pending_bytes
                pending, pending_bytes = [], 0

        for segment in group:
            path = _log_path(directory, segment.base_offset)
            retain_deletes = int(os.stat(path).st_mtime * 1000) > delete_horizon_ms
            for header, batch in read_batches(path, segment.size, throttler, task.read_buffer_size):
                stats.bytes_read += header.size
                out = _keep_batch(header, batch, offset_map, retain_deletes, task.producer_last_offsets, stats, aborted)
                if out is None:
                    continue
                if pending and not cleaned.offset_index.can_append_offset(header.last_offset):
                    raise CorruptRecordBatch(f"{path}: offset {header.last_offset} overflows the cleaned segment")
                pending.append(out)
                pending_bytes += len(out)
                last_offset = header.last_offset
                batch_max = rb.read_header(out, 0).max_timestamp if out is not batch else header.max_timestamp
                if batch_max > max_ts:
                    max_ts, max_ts_offset = batch_max, header.last_offset
                if pending_bytes >= max(task.config.index_interval_bytes, 1):
                    flush_pending()
        flush_pending()
        cleaned.flush()
        cleaned.close()
        mtime = os.stat(_log_path(directory, group[-1].base_offset)).st_mtime
        for path in (cleaned.log_path, cleaned.offset_index.path, cleaned.time_index.path):
            if path.exists():
                os.utime(path, (mtime, mtime))
    except BaseException:
        cleaned.close()
        remove_cleaned(directory, group[0].base_offset)
        raise


def delete_horizon(task: CleanTask) -> int:
    """Kafka's (legacy) delete horizon: the last modification (ms) of the last segment wholly in
    the clean section, less `delete.retention.ms`; 0 when nothing is clean yet. Tombstones in
    segments last modified at or before it are removed."""
    clean = [s for s, nxt in zip(task.segments, task.segments[1:]) if nxt.base_offset <= task.first_dirty_offset]
    if not clean:
        return 0
    mtime = int(os.stat(_log_path(Path(task.dir), clean[-1].base_offset)).st_mtime * 1000)
    return mtime - task.config.delete_retention_ms


def clean(task: CleanTask) -> CleanResult:
    """One cleaning (steps 1-3 of the module docstring); runs in a worker process. Returns where
    it ended and the cleaned groups, whose `.cleaned` files are written and fsynced."""
    started = time.monotonic()
    stats = CleanerStats()
    throttler = Throttler(task.io_bytes_per_second, task.owner_pid)
    offset_map = OffsetMap(task.map_capacity)
    horizon = delete_horizon(task)
    end = build_offset_map(task, offset_map, stats, throttler)
    directory = Path(task.dir)
    # the segments holding offsets below `end`; when the map stopped inside a segment, that one is
    # rewritten whole and its records from `end` on, not in the map, all stay
    to_clean = [s for s in task.segments if s.base_offset < end]
    groups = group_segments(directory, to_clean, task.config)
    done: list[tuple[int, tuple[int, ...]]] = []
    try:
        for group in groups:
            throttler.maybe_throttle(0)
            _clean_group(task, group, offset_map, horizon, stats, throttler)
            done.append((group[0].base_offset, tuple(s.base_offset for s in group)))
    except BaseException:
        for base, _ in done:
            remove_cleaned(directory, base)
        raise
    fsync_directory(directory)
    stats.elapsed_s = time.monotonic() - started
    return CleanResult(end, tuple(done), stats)
