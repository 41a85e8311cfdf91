"""Which log the cleaner takes next and how far (Kafka's `LogCleanerManager`), with no I/O beyond
the `cleaner-offset-checkpoint` files.

Per compacted log (`cleanup.policy` holds compact):
- first dirty offset: the checkpointed end of the last cleaning, or the log start offset when there
  is none, when it lies below the log start offset or beyond LEO, or when the log was truncated
  since (Kafka truncates the checkpoint then; we start over, which costs a full pass, never data);
- first uncleanable offset: the base offset of the first segment that is the active one, is not
  wholly below the last stable offset (the high watermark, or the start of the oldest open
  transaction), or holds a record younger than `min.compaction.lag.ms`;
- dirty ratio: bytes of the segments in [first dirty, first uncleanable) over bytes of the
  segments below the first uncleanable offset;
- a log is cleanable when it has dirty bytes and its ratio exceeds `min.cleanable.dirty.ratio`, or
  when its first dirty segment is older than `max.compaction.lag.ms` (it must be cleaned now).
`grab_filthiest_log` picks the cleanable log with the highest ratio and marks it in progress; a
log in progress or marked uncleanable (a cleaning failed on damaged data) is skipped. Kafka pauses
cleaning around truncations and deletions; here the shell instead swaps in nothing cleaned across
one (`Log.truncations`, the log's identity), which needs no pause bookkeeping.

Checkpoint format: Kafka's offset checkpoint (version 0, count, then `topic partition offset`
lines), one `cleaner-offset-checkpoint` per log dir; written through `storage.checkpoint`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from protocol.topic_partition import TopicPartition
from storage import checkpoint
from storage.errors import CorruptCheckpoint
from storage.log import Log

log = logging.getLogger(__name__)

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True)
class LogToClean:
    """A compacted log's cleaning state now; sizes in bytes, offsets absolute."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool  # max.compaction.lag.ms passed for its oldest dirty segment

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def cleanable(self) -> bool:
        return self.cleanable_bytes > 0 and (
            self.needs_compaction_now or self.dirty_ratio > self.log.config.min_cleanable_dirty_ratio
        )


def cleanable_offsets(
    lg: Log, checkpoint_offset: int | None, high_watermark: int, now_ms: int
) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, needs compaction now) of `lg`; see the
    module docstring for the rules."""
    first_dirty = checkpoint_offset if checkpoint_offset is not None else lg.log_start_offset
    if first_dirty < lg.log_start_offset or first_dirty > lg.log_end_offset:
        first_dirty = lg.log_start_offset
    segments = lg.segments
    bounds = [s.base_offset for s in segments[1:]]
    uncleanable = segments[-1].base_offset
    high_watermark = lg.last_stable_offset(high_watermark)
    min_lag = lg.config.min_compaction_lag_ms
    for segment, next_base in zip(segments, bounds):
        if next_base > high_watermark or (
            min_lag > 0 and next_base > first_dirty and segment.largest_timestamp() > now_ms - min_lag
        ):
            uncleanable = segment.base_offset
            break
    needs_now = False
    max_lag = lg.config.max_compaction_lag_ms
    if max_lag < (1 << 63) - 1:
        for segment, next_base in zip(segments, bounds):
            if next_base > first_dirty and segment.base_offset < uncleanable:
                first_ts = segment.first_batch_timestamp()
                needs_now = first_ts is not None and first_ts < now_ms - max_lag
                break
    return first_dirty, uncleanable, needs_now


def log_to_clean(
    tp: TopicPartition, lg: Log, checkpoint_offset: int | None, high_watermark: int, now_ms: int
) -> LogToClean:
    first_dirty, uncleanable, needs_now = cleanable_offsets(lg, checkpoint_offset, high_watermark, now_ms)
    clean = cleanable = 0
    segments = lg.segments
    for segment, next_base in zip(segments, [s.base_offset for s in segments[1:]] + [None]):
        if next_base is None or segment.base_offset >= uncleanable:
            break
        if next_base <= first_dirty:
            clean += segment.size
        else:
            cleanable += segment.size
    return LogToClean(tp, lg, first_dirty, uncleanable, clean, cleanable, needs_now)


class LogCleanerManager:
    def __init__(self, log_dirs: list[Path]):
        self.log_dirs = list(log_dirs)
        self.checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self.truncations: dict[TopicPartition, int] = {}  # Log.truncations when last cleaned

    # ---- checkpoints ---------------------------------------------------------------------------
    def load_checkpoints(self) -> None:
        """Read every dir's `cleaner-offset-checkpoint` (blocking; a corrupt one is logged and
        treated as empty: the next cleanings start from the log start offsets)."""
        for d in self.log_dirs:
            try:
                self.checkpoints[d] = checkpoint.read_offsets(d / CLEANER_CHECKPOINT)
            except CorruptCheckpoint as e:
                log.warning("%s; cleaning starts over from the log start offsets", e)
                self.checkpoints[d] = {}

    def checkpoint_of(self, log_dir: Path, tp: TopicPartition) -> int | None:
        return self.checkpoints.get(log_dir, {}).get(tp)

    def checkpoint_snapshot(self, log_dir: Path) -> tuple[Path, dict[TopicPartition, int]]:
        """(path, offsets) to write with `storage.checkpoint.write_offsets` (in a worker thread)."""
        return log_dir / CLEANER_CHECKPOINT, dict(self.checkpoints.get(log_dir, {}))

    def forget(self, tp: TopicPartition) -> list[Path]:
        """A deleted or moved log: drop its checkpoint entries; returns the dirs to rewrite."""
        changed = []
        for d, offsets in self.checkpoints.items():
            if offsets.pop(tp, None) is not None:
                changed.append(d)
        self.uncleanable.discard(tp)
        self.truncations.pop(tp, None)
        return changed

    # ---- choosing -------------------------------------------------------------------------------
    def logs_to_clean(
        self,
        logs: dict[TopicPartition, tuple[Path, Log]],
        high_watermark: Callable[[TopicPartition], int],
        now_ms: int | None = None,
    ) -> list[LogToClean]:
        """Every compacted log's state now (in progress and uncleanable ones excluded)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        out = []
        for tp, (d, lg) in logs.items():
            if not lg.config.compact or tp in self.in_progress or tp in self.uncleanable:
                continue
            offset = self.checkpoint_of(d, tp)
            if self.truncations.setdefault(tp, 0) != lg.truncations:
                offset = None  # truncated since the last cleaning (a loaded log starts at 0)
            out.append(log_to_clean(tp, lg, offset, high_watermark(tp), now))
        return out

    def grab_filthiest_log(
        self,
        logs: dict[TopicPartition, tuple[Path, Log]],
        high_watermark: Callable[[TopicPartition], int],
        now_ms: int | None = None,
    ) -> LogToClean | None:
        """The cleanable log with the highest dirty ratio, now marked in progress; or None."""
        cleanable = [ltc for ltc in self.logs_to_clean(logs, high_watermark, now_ms) if ltc.cleanable]
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda ltc: (ltc.needs_compaction_now, ltc.dirty_ratio))
        self.in_progress.add(filthiest.tp)
        return filthiest

    def done_cleaning(self, tp: TopicPartition, log_dir: Path, lg: Log, end_offset: int | None) -> None:
        """A cleaning of `tp` ended; with `end_offset` it succeeded and becomes the checkpoint."""
        self.in_progress.discard(tp)
        if end_offset is not None:
            self.checkpoints.setdefault(log_dir, {})[tp] = end_offset
            self.truncations[tp] = lg.truncations

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        """A cleaning failed on the log's data (Kafka's `markPartitionUncleanable`): skip it until
        the broker restarts."""
        self.in_progress.discard(tp)
        self.uncleanable.add(tp)


@dataclass(frozen=True)
class DirtyStateOnDisk:
    """A cleaned log's state as its files show it (for operators' tools; no broker needed)."""

    tp: TopicPartition
    first_dirty_offset: int  # the checkpointed end of its last cleaning
    clean_bytes: int
    dirty_bytes: int  # inactive segments at or above the first dirty offset (the active one excluded)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def dirty_state_on_disk(log_dir: Path) -> list[DirtyStateOnDisk]:
    """The logs of `log_dir` its `cleaner-offset-checkpoint` names (compacted logs cleaned at
    least once), with their dirty ratio computed from the segment file sizes as the cleaner does,
    except that the high watermark and min.compaction.lag.ms bounds, which only the broker knows,
    are left out. A log never cleaned is not listed. Read-only and safe beside a running broker
    (a file swapped away meanwhile counts as empty)."""
    try:
        offsets = checkpoint.read_offsets(log_dir / CLEANER_CHECKPOINT)
    except (FileNotFoundError, CorruptCheckpoint):
        return []
    out = []
    for tp, first_dirty in sorted(offsets.items()):
        segments = []
        for path in (log_dir / f"{tp[0]}-{tp[1]}").glob("*.log"):
            try:
                segments.append((int(path.stem), path.stat().st_size))
            except (ValueError, FileNotFoundError):
                continue
        segments.sort()
        clean = dirty = 0
        for (_, size), (next_base, _) in zip(segments, segments[1:]):
            if next_base <= first_dirty:
                clean += size
            else:
                dirty += size
        out.append(DirtyStateOnDisk(tp, first_dirty, clean, dirty))
    return out
