"""Opening a partition directory: leftovers, index checks, crash recovery (Kafka `LogLoader`).

Outcomes, each logged and each tested:
- `*.deleted`, `*.tmp`, `*.cleaned` (a cleaning the crash interrupted) and orphan index files are
  removed;
- a `*.swap` segment (a cleaned segment whose swap the crash interrupted) completes its swap, as
  Kafka's loader does: the segments whose base offsets lie in its offset range are removed, it is
  renamed to its final name and recovered (indexes rebuilt);
- after a clean shutdown, segment indexes are sanity-checked; a missing or corrupt one is rebuilt
  from its `.log` (a lost index never loses data); the active segment's tail (the batches after
  its last index entry) is checked too, and recovered like an unclean shutdown's if damaged;
- after an unclean shutdown, every segment from the one holding the recovery point onwards is
  recovered: each batch's size and CRC checked, the file cut at the first invalid batch, indexes
  rebuilt; segments after a cut are deleted (their data would not be contiguous); the recovered
  files are fsynced and the recovery point moves to the new LEO;
- a corrupt `leader-epoch-checkpoint` is rebuilt from the partition leader epochs stamped in the
  batch headers;
- log start offset = max(checkpointed value, first segment's base offset).
"""

from __future__ import annotations

import logging
from pathlib import Path

from storage.checkpoint import LEADER_EPOCH_CHECKPOINT
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import CorruptCheckpoint, CorruptIndex
from storage.log import Log
from storage.producer_state_loader import rebuild_producer_state
from storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from storage.transaction_index import TXN_INDEX_SUFFIX

log = logging.getLogger(__name__)


def _complete_swaps(directory: Path, config: LogConfig) -> set[int]:
    """Finish interrupted cleaner swaps; returns the base offsets of the segments completed."""
    done = set()
    for path in sorted(directory.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
        base = int(path.name.split(".")[0])
        swap = LogSegment(directory, base, config, suffix=SWAP_SUFFIX)
        aborted = list(swap.txn_index.entries)  # written by the swap, not derivable from it alone
        swap.recover()
        swap.txn_index.reset(aborted)
        end = swap.read_next_offset()
        for old in directory.glob(f"*{LOG_SUFFIX}"):
            if old.stem.isdigit() and base <= int(old.stem) < max(end, base + 1):
                log.warning("completing the cleaner's swap of %s: removing %s", path, old)
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    (directory / file_name(int(old.stem), suffix)).unlink(missing_ok=True)
        swap.change_suffix(SWAP_SUFFIX, "")
        swap.close()
        done.add(base)
    for path in directory.glob(f"*{SWAP_SUFFIX}"):  # index swaps without their log
        path.unlink()
    return done


def _cleanup(directory: Path) -> set[int]:
    """Remove leftovers; return the base offsets of the `.log` files."""
    bases = set()
    for path in directory.iterdir():
        if path.name.endswith((DELETED_SUFFIX, ".tmp", CLEANED_SUFFIX)) and path.is_file():
            if path.name.endswith(CLEANED_SUFFIX):
                log.warning("removing %s, left by an interrupted cleaning", path)
            path.unlink()
            continue
        if path.suffix == LOG_SUFFIX and path.stem.isdigit():
            bases.add(int(path.stem))
    for path in directory.iterdir():
        if (
            path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and path.stem.isdigit()
            and int(path.stem) not in bases
        ):
            log.warning("removing orphan index %s", path)
            path.unlink()
    return bases


def _rebuild_epochs(segments: list[LogSegment], path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(path)
    cache.clear()
    for segment in segments:
        for _, header in segment.headers(0):
            if header.partition_leader_epoch > cache.latest_epoch:
                cache.assign(header.partition_leader_epoch, header.base_offset)
    return cache


def load_log(
    directory: Path, config: LogConfig, *, clean_shutdown: bool, recovery_point: int = 0, log_start_offset: int = 0
) -> Log:
    """Open (creating if needed) the log in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for path in directory.iterdir():
        if path.name.endswith(CLEANED_SUFFIX):
            log.warning("removing %s, left by an interrupted cleaning", path)
            path.unlink()
    _complete_swaps(directory, config)
    bases = sorted(_cleanup(directory))
    epoch_path = directory / LEADER_EPOCH_CHECKPOINT
    if not bases:
        return Log.create(directory, config, log_start_offset)
    segments = [LogSegment(directory, base, config) for base in bases]
    try:
        epochs = LeaderEpochCache.load(epoch_path)
    except CorruptCheckpoint as e:
        log.warning("%s; rebuilding it from the batch headers", e)
        epochs = None

    first_unflushed = (
        len(segments)
        if clean_shutdown
        else next(
            (i for i, nxt in enumerate(bases[1:] + [None]) if nxt is None or nxt > recovery_point), len(segments) - 1
        )
    )
    for segment in segments[:first_unflushed]:
        try:
            for index in (segment.offset_index, segment.time_index):
                if segment.size and not index.path.exists():
                    raise CorruptIndex(f"{index.path} is missing")
            segment.offset_index.sanity_check(segment.size)
            segment.time_index.sanity_check(segment.size)
        except CorruptIndex as e:
            log.warning("%s; rebuilding the indexes of %s", e, segment.log_path)
            segment.recover()

    if clean_shutdown and not segments[-1].tail_is_valid():
        log.warning(
            "%s: the active segment's tail is damaged although the shutdown was clean; recovering it",
            segments[-1].log_path,
        )
        first_unflushed = len(segments) - 1
    recovered = segments[first_unflushed:]
    for i, segment in enumerate(recovered):
        truncated = segment.recover(recovered[i + 1].base_offset if i + 1 < len(recovered) else None)
        if truncated:
            log.warning("recovery cut %d invalid bytes from %s", truncated, segment.log_path)
            for later in recovered[i + 1 :]:
                log.warning("recovery deletes %s, which followed a cut", later.log_path)
                later.delete()
            segments = segments[: first_unflushed + i + 1]
            break
    for segment in recovered[: len(segments) - first_unflushed]:
        segment.flush()

    if epochs is None:
        epochs = _rebuild_epochs(segments, epoch_path)
    result = Log(
        directory,
        config,
        segments,
        log_start_offset=max(log_start_offset, segments[0].base_offset),
        recovery_point=recovery_point,
        epoch_cache=epochs,
    )
    leo = result.log_end_offset
    epochs.truncate_from_end(leo)
    if result.log_start_offset > leo:
        result.truncate_fully_and_start_at(result.log_start_offset)
    if recovered:
        result.complete_flush(leo)
    rebuild_from = [recovered[0].base_offset] if recovered and len(segments) > first_unflushed else []
    for segment in segments:
        if segment.txn_index.corrupt:
            log.warning("%s is unreadable; rebuilding it from the markers", segment.txn_index.path)
            rebuild_from.append(segment.base_offset)
    rebuild_producer_state(result, rebuild_txn_index_from=min(rebuild_from, default=None))
    return result
