"""One log segment: `<base offset, 20 digits>.log` with its `.index`, `.timeindex` and, once a
transaction aborted in it, `.txnindex` (`storage/transaction_index.py`).

The `.log` holds RecordBatch v2 bytes exactly as appended (offsets already assigned); this module
reads only batch headers, except `find_offset_by_timestamp`, which decodes the one batch that holds
the answer, and `recover`, which checks every batch's size and CRC.

Index rule (Kafka `LogSegment.append`): after more than `index.interval.bytes` have been appended
since the last entry, the next append adds `.index` entry (its last offset -> its start position)
and a `.timeindex` entry (max timestamp so far -> its offset).

Invariant: the batches of a segment have increasing offsets, the first at or after the segment's
base offset and the last below the next segment's base offset. Offsets may have gaps: the log
cleaner removes records without renumbering the rest, and a follower copies the leader's gaps
(Kafka's compacted logs). Recovery and verified reads enforce the order and the bounds, which also
catches most damage to the header fields the CRC does not cover (base offset, batch length).

Not thread-safe: one owner (the `Log`) calls it. Every call is plain blocking file I/O on an fd
(`os.pread`/`os.pwrite`); see `storage/log.py` for what may run on the event loop.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch
from storage.config import LogConfig
from storage.index import OffsetIndex, TimeIndex
from storage.tail_cache import TailCache
from storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
DELETED_SUFFIX = ".deleted"
# The log cleaner's (Kafka's): a segment being written is `.cleaned`, one ready to replace the
# segments it cleaned is `.swap` (see storage/cleaner/ and Log.replace_segments).
CLEANED_SUFFIX, SWAP_SUFFIX = ".cleaned", ".swap"
_SCAN_CHUNK = 64 * 1024
#: the first read of a header scan: a tail read's scan covers a batch or two, not 64 KiB
_FIRST_SCAN_CHUNK = 4096
#: recent appends remembered per segment (their start positions and last offsets), so reads at
#: the tail (followers, consumers, the HW's batch) find their batch without an index scan
RECENT_APPENDS = 256


def check_offset_order(
    header: rb.BatchHeader, expected: int, path: Path, position: int, limit: int | None = None
) -> None:
    """Batches in a segment follow each other: a batch starts at or after `expected` (the offset
    after the previous batch, or the segment's base offset) and ends below `limit` (the next
    segment's base offset, when known). A base offset (outside the CRC) that breaks this is
    corruption; a gap alone is not (compaction leaves gaps)."""
    if header.base_offset < expected:
        raise CorruptRecordBatch(
            f"{path}: batch at position {position} has base offset {header.base_offset}, expected >= {expected}"
        )
    if limit is not None and header.last_offset >= limit:
        raise CorruptRecordBatch(
            f"{path}: batch at position {position} has base offset {header.base_offset} and last offset "
            f"{header.last_offset}, beyond the next segment's base offset {limit}"
        )


def fsync_directory(path: Path) -> None:
    """fsync a directory, so renames and new files in it survive a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_name(base_offset: int, suffix: str) -> str:
    """Kafka's segment file name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


CLOSED = -1  # the file descriptor of a closed segment


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, *, new: bool = False, suffix: str = ""):
        """Open (or with `new`, create empty) the segment's files; `suffix` (`.cleaned`, `.swap`)
        follows each file's own suffix, as in Kafka's `00000000000000000000.log.cleaned`."""
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.log_path = directory / (file_name(base_offset, LOG_SUFFIX) + suffix)
        flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if new else 0)
        self._fd = os.open(self.log_path, flags, 0o644)  # CLOSED (-1) after close() / delete()
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(
            directory / (file_name(base_offset, INDEX_SUFFIX) + suffix),
            base_offset,
            config.segment_index_bytes,
            new=new,
        )
        self.time_index = TimeIndex(
            directory / (file_name(base_offset, TIME_INDEX_SUFFIX) + suffix),
            base_offset,
            config.segment_index_bytes,
            new=new,
        )
        txn_path = directory / (file_name(base_offset, TXN_INDEX_SUFFIX) + suffix)
        if new:
            txn_path.unlink(missing_ok=True)
        self.txn_index = TransactionIndex(txn_path)
        self.created_ms = int(time.time() * 1000)
        # segment.jitter.ms: each segment rolls by time up to this much early (Kafka's randomSegmentJitter)
        jitter = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self._bytes_since_last_index_entry = 0
        self._max_ts: tuple[int, int] | None = None  # (max timestamp, its offset), lazily
        self._rolling_ts: int | None = None  # first batch's max timestamp, lazily
        self._next_offset: int | None = None
        self._tail = TailCache()  # the bytes of the last small appends (reads at the tail)
        self._forget_recent()

    def _forget_recent(self) -> None:
        self._tail.clear()
        self._recent_pos: list[int] = []  # start position of each remembered append, ascending
        self._recent_last: list[int] = []  # its last offset, ascending
        self._recent_floor: int | None = None  # the last offset before the first one (None: unknown)

    def _remember(self, position: int, previous_next_offset: int | None, last_offset: int) -> None:
        if not self._recent_pos:
            if position == 0:
                self._recent_floor = -(1 << 63)
            else:
                self._recent_floor = None if previous_next_offset is None else previous_next_offset - 1
        self._recent_pos.append(position)
        self._recent_last.append(last_offset)
        if len(self._recent_pos) > 2 * RECENT_APPENDS:
            self._recent_floor = self._recent_last[RECENT_APPENDS - 1]
            del self._recent_pos[:RECENT_APPENDS]
            del self._recent_last[:RECENT_APPENDS]

    def _recent_position(self, offset: int) -> int | None:
        """The start of the remembered append holding `offset` (a batch start at or before the
        batch holding it), or None when `offset` is outside the remembered appends."""
        last = self._recent_last
        if not last or offset > last[-1]:
            return None
        i = bisect.bisect_left(last, offset)
        if i == 0 and (self._recent_floor is None or offset <= self._recent_floor):
            return None
        return self._recent_pos[i]

    # ---- reading headers ---------------------------------------------------------------------
    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self._fd, size, position)

    def headers(self, position: int = 0, end: int | None = None) -> Iterator[tuple[int, rb.BatchHeader]]:
        """(position, header) of each batch from `position` (a batch start) to `end`; raises
        CorruptRecordBatch where a header is invalid or a batch overruns the file."""
        end = self.size if end is None else end
        buf, buf_pos, chunk = b"", position, _FIRST_SCAN_CHUNK
        while position < end:
            off = position - buf_pos
            if off + rb.HEADER_SIZE > len(buf):
                buf, buf_pos, off = self.pread(chunk, position), position, 0
                chunk = _SCAN_CHUNK
            header = self._header_at(buf, off, position, end)
            yield position, header
            position += header.size

    def _header_at(self, buf: bytes, off: int, position: int, end: int) -> rb.BatchHeader:
        if end - position < rb.HEADER_SIZE or len(buf) - off < rb.HEADER_SIZE:
            raise CorruptRecordBatch(f"{self.log_path}: {end - position} trailing bytes at {position}")
        header = rb.BatchHeader._make(rb.HEADER.unpack_from(buf, off))
        if header.magic != rb.MAGIC:
            raise CorruptRecordBatch(f"{self.log_path}: magic {header.magic} at position {position}")
        if header.batch_length < rb.HEADER_SIZE - rb.LOG_OVERHEAD or position + header.size > end:
            raise CorruptRecordBatch(f"{self.log_path}: batch at {position} of {header.size} bytes overruns {end}")
        return header

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, rb.BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= `offset`, or None."""
        position = self._recent_position(offset)
        if position is None:
            _, position = self.offset_index.lookup(offset)
        for pos, header in self.headers(max(position, start_position)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self._next_offset is None:
            last_offset, position = self.offset_index.lookup(1 << 62)
            nxt = self.base_offset
            for _, header in self.headers(position):
                nxt = header.next_offset
            self._next_offset = nxt
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """Largest batch max_timestamp seen in this segment (-1 when unknown)."""
        return self._max_timestamp_and_offset()[0]

    def _max_timestamp_and_offset(self) -> tuple[int, int]:
        if self._max_ts is None:
            last = self.time_index.last_entry()
            self._max_ts = last if last else (-1, self.base_offset)
        return self._max_ts

    def largest_timestamp(self) -> int:
        """What retention compares with `retention.ms`: the max timestamp, else the file mtime."""
        ts = self.max_timestamp
        return ts if ts >= 0 else int(os.stat(self.log_path).st_mtime * 1000)

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (Kafka's `getFirstBatchTimestamp`, what
        max.compaction.lag.ms compares), else the file mtime; None for an empty segment."""
        ts = self._rolling_based_timestamp()
        if ts is None:
            return None
        return ts if ts >= 0 else int(os.stat(self.log_path).st_mtime * 1000)

    def _rolling_based_timestamp(self) -> int | None:
        if self._rolling_ts is None and self.size > 0:
            self._rolling_ts = next(self.headers(0))[1].max_timestamp
        return self._rolling_ts

    # ---- writing -----------------------------------------------------------------------------
    def should_roll(self, messages_size: int, max_timestamp: int, max_offset: int) -> bool:
        """Kafka's roll rule: size, message-time age (segment.ms less this segment's jitter), full
        index, or relative-offset overflow."""
        rolling_ts = self._rolling_based_timestamp()
        waited = (
            (max_timestamp - rolling_ts)
            if rolling_ts is not None and rolling_ts >= 0
            else int(time.time() * 1000) - self.created_ms
        )
        return (
            self.size > self.config.segment_bytes - messages_size
            or (self.size > 0 and waited > self.config.segment_ms - self.roll_jitter_ms)
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.offset_index.can_append_offset(max_offset)
        )

    def append(
        self, buffers: list, size: int, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int
    ) -> None:
        """Append whole batches (offsets assigned), given as buffers totalling `size` bytes and
        written in one `pwritev`, whose last offset is `last_offset`."""
        position, previous_next_offset = self.size, self._next_offset
        if position == 0:
            self._rolling_ts = max_timestamp
        try:
            written = os.pwritev(self._fd, buffers, position)
        except OSError:
            with contextlib.suppress(OSError):  # no torn append stays behind the segment's size
                os.ftruncate(self._fd, position)
            raise
        if written != size:
            os.ftruncate(self._fd, position)
            raise OSError(f"short write to {self.log_path}: {written} of {size} bytes")
        self.size += size
        self._next_offset = last_offset + 1
        self._remember(position, previous_next_offset, last_offset)
        self._tail.add(buffers, size, last_offset)
        if max_timestamp > self.max_timestamp:
            self._max_ts = (max_timestamp, offset_of_max_timestamp)
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(*self._max_timestamp_and_offset())
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size

    def tail_is_valid(self) -> bool:
        """Whether the batches after the last offset-index entry (at most about one index interval
        and a batch) are whole, with valid CRCs and increasing offsets: the cheap check of an
        active segment after a clean shutdown, which otherwise skips recovery."""
        position = max(0, self.offset_index.positions_at_or_below(self.size)[1])
        try:
            expected = None
            for at, header in self.headers(position):
                if expected is not None:
                    check_offset_order(header, expected, self.log_path, at)
                rb.validate_batch(self.pread(header.size, at), 0, header)
                expected = header.next_offset
        except CorruptRecordBatch:
            return False
        return True

    def recover(self, next_base_offset: int | None = None) -> int:
        """Rebuild both indexes from the `.log`, checking each batch's size, CRC and offset order
        (below `next_base_offset`, the next segment's base offset, when given), and cut the file at
        the first invalid batch. Returns the number of bytes truncated (Kafka
        `LogSegment.recover`). The transaction index is emptied: the caller rebuilds it from the
        markers as it replays producer state."""
        self.txn_index.reset()
        self.offset_index.reset()
        self.time_index.reset()
        self._forget_recent()
        self._max_ts = (-1, self.base_offset)
        valid = last_index_entry = 0
        expected = self.base_offset
        try:
            for position, header in self.headers(0):
                check_offset_order(header, expected, self.log_path, position, next_base_offset)
                if not self.offset_index.can_append_offset(header.last_offset):
                    raise CorruptRecordBatch(f"{self.log_path}: offset {header.last_offset} overflows the index")
                rb.validate_batch(self.pread(header.size, position), 0, header)
                expected = header.next_offset
                if header.max_timestamp > self._max_ts[0]:
                    self._max_ts = (header.max_timestamp, header.last_offset)
                if valid - last_index_entry > self.config.index_interval_bytes:
                    self.offset_index.append(header.last_offset, valid)
                    self.time_index.maybe_append(*self._max_ts)
                    last_index_entry = valid
                valid += header.size
        except CorruptRecordBatch:
            pass
        truncated = self.size - valid
        if truncated:
            os.ftruncate(self._fd, valid)
            self.size = valid
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._next_offset = None
        self._rolling_ts = None
        self.offset_index.trim()
        if self._max_ts[0] >= 0:
            self.time_index.maybe_append(*self._max_ts)
        self.time_index.trim()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; returns the bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self._forget_recent()
        self._bytes_since_last_index_entry = 0
        self._next_offset = None
        self._max_ts = None
        self._rolling_ts = None
        if position == 0:
            self.created_ms = int(time.time() * 1000)
        return removed

    # ---- queries -----------------------------------------------------------------------------
    def read(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool = True
    ) -> tuple[int, bytes, int] | None:
        """Whole batches from the one holding `start_offset`: (its position, bytes, offset after
        the last batch returned). Stops before a batch whose last offset is >= `max_offset`, and
        at `max_bytes` (but returns the first batch even when larger, with `min_one_batch`). None
        when no batch holds start_offset. The end is found through the offset index and a short
        header scan, then the bytes come in one pread."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return start, b"", start_offset
        limit = min(self.size, start + max(max_bytes, first.size if min_one_batch else 0))
        if max_offset is not None:
            stop = self.translate_offset(max_offset, start)
            if stop is not None:
                limit = min(limit, stop[0])
        before, _ = self.offset_index.positions_at_or_below(limit)
        scan_from = max(start, before)
        i = bisect.bisect_right(self._recent_pos, limit) - 1
        if i >= 1:  # the append before the last one starting at or below the limit ends below it
            scan_from = max(scan_from, self._recent_pos[i - 1])
        end, next_offset = scan_from, start_offset
        for position, header in self.headers(scan_from):
            if position + header.size > limit:
                break
            end, next_offset = position + header.size, header.next_offset
        return start, (self.pread(end - start, start) if end > start else b""), next_offset

    def read_tail(self, start_offset: int, max_bytes: int, max_offset: int | None) -> tuple[bytes, int] | None:
        """`read`'s answer from the last small appends kept in memory (`storage/tail_cache.py`):
        (bytes, offset after them), already verified, or None when they do not hold `start_offset`
        or the first of them alone is over a bound (the file read answers then)."""
        return self._tail.read(start_offset, max_bytes, max_offset)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` whose timestamp is
        >= `timestamp` (ListOffsets by time), or None."""
        _, offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(offset, start_offset))
        for pos, header in self.headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                for record in rb.decode_records(self.pread(header.size, pos), 0, header):
                    if record.timestamp >= timestamp and record.offset >= start_offset:
                        return record.offset, record.timestamp
        return None

    # ---- lifecycle ---------------------------------------------------------------------------
    def on_become_inactive(self) -> None:
        """On roll: record the final max timestamp in the time index and trim both indexes."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(*self._max_timestamp_and_offset())
        self._tail.clear()
        self.offset_index.trim()
        self.time_index.trim()

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix `old` to `new` (Kafka's `changeFileSuffixes`);
        open descriptors stay valid. A missing index file is skipped."""
        for holder in (self, self.offset_index, self.time_index, self.txn_index):
            path = holder.log_path if holder is self else holder.path  # type: ignore[union-attr]
            if not path.name.endswith(old):
                raise ValueError(f"{path} does not end with {old!r}")
            target = path.with_name(path.name[: len(path.name) - len(old)] + new)
            if path.exists():
                os.replace(path, target)
            if holder is self:
                self.log_path = target
            else:
                holder.path = target  # type: ignore[union-attr]

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def dup_fds(self) -> list[int]:
        """Duplicated fds of the segment's files, for an fsync off the event loop (pending index
        entries are written first)."""
        fds = [self._fd]
        for index in (self.offset_index, self.time_index):
            index.write_pending()
            fds.append(index._open())
        dups = [os.dup(fd) for fd in fds]
        txn_fd = self.txn_index.dup_fd()
        return dups if txn_fd is None else dups + [txn_fd]

    def close(self) -> None:
        if self._fd >= 0:
            self.on_become_inactive()
            self.offset_index.close()
            self.time_index.close()
            os.close(self._fd)
            self._fd = CLOSED

    def mark_deleted(self) -> list[Path]:
        """Close the segment and rename every file to `*.deleted` (the first half of Kafka's
        delete sequence); returns the renamed paths for `unlink_all`."""
        os.close(self._fd)
        self._fd = CLOSED
        paths = [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]
        for index in (self.offset_index, self.time_index):
            if index._fd is not None:
                os.close(index._fd)
                index._fd = None
        renamed = []
        for path in paths:
            if path.exists():
                target = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, target)
                renamed.append(target)
        return renamed

    def delete(self) -> None:
        """Rename every file to `*.deleted`, then remove them (Kafka's delete sequence)."""
        unlink_all(self.mark_deleted())


def unlink_all(paths: list[Path]) -> None:
    """Remove files renamed by `mark_deleted` (may run in a worker thread)."""
    for path in paths:
        path.unlink(missing_ok=True)
