"""The log cleaner's trio shell (Kafka's `LogCleaner` and its `CleanerThread`s).

`run()` starts `log.cleaner.threads` cleaner tasks. Each loops: take the filthiest cleanable log
(`LogCleanerManager.grab_filthiest_log`), run one cleaning (`cleaner.clean`) in a worker process
(trio-parallel; the CPU work of reading, hashing keys and rewriting batches never runs on the
broker's event loop, and the process is killed if the cleaning is cancelled), then, back on the
event loop, swap the cleaned segments in (`Log.replace_segments`), unlink the replaced files in a
worker thread `file.delete.delay.ms` later (as Kafka deletes segments), and write the
`cleaner-offset-checkpoint`; it sleeps `log.cleaner.backoff.ms` when
nothing is cleanable. A log that was deleted, truncated or lost a cleaned segment to retention
while its cleaning ran gets nothing swapped in (its `.cleaned` files are removed) and is cleaned
again later; a cleaning that fails on the log's data marks the log uncleanable (logged).

Each cleaning logs one line: the log, its dirty section, bytes read and written, the size
reduction, the records kept and the time taken.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio
import trio_parallel

from protocol.errors import CorruptRecordBatch
from protocol.topic_partition import TopicPartition
from storage import checkpoint
from storage.cleaner.cleaner import CleanResult, CleanTask, SegmentInfo, clean, remove_cleaned
from storage.cleaner.manager import LogCleanerManager, LogToClean
from storage.cleaner.offset_map import capacity_for
from storage.segment import unlink_all

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's `log.cleaner.*` keys (Kafka's `CleanerConfig`); sizes in bytes, times in ms.
    Each field names its key (`metadata["key"]`): `broker.config.derive` fills them from the
    broker's config table, whose defaults are the only ones."""

    enable: bool = field(metadata={"key": "log.cleaner.enable"})
    threads: int = field(metadata={"key": "log.cleaner.threads"})
    dedupe_buffer_size: int = field(metadata={"key": "log.cleaner.dedupe.buffer.size"})  # (all threads)
    io_buffer_load_factor: float = field(metadata={"key": "log.cleaner.io.buffer.load.factor"})
    io_max_bytes_per_second: float = field(metadata={"key": "log.cleaner.io.max.bytes.per.second"})  # (all threads)
    backoff_ms: int = field(metadata={"key": "log.cleaner.backoff.ms"})
    io_buffer_size: int = field(metadata={"key": "log.cleaner.io.buffer.size"})  # bytes per segment read

    @property
    def map_capacity(self) -> int:
        return capacity_for(self.dedupe_buffer_size, self.threads, self.io_buffer_load_factor)


def _init_worker() -> bool:
    """In each worker process: run at a lower CPU priority (nice 10), so that on a busy machine
    the broker's event loop gets a core first and a cleaning only takes what is left."""
    os.nice(10)
    return True


def _retire_after_each_job() -> bool:
    """Worker processes exit after each cleaning, so an offset map's memory goes back to the OS."""
    return True


class LogCleaner:
    def __init__(
        self,
        log_manager,
        config: CleanerConfig,
        high_watermark: Callable[[TopicPartition], int] | None = None,
        *,
        step_hook: Callable[[str], None] | None = None,
    ):
        """`log_manager`: a `storage.log_manager.LogManager` (its `logs` and `dir_of`);
        `high_watermark(tp)`: the partition's HW (default: LEO), the cleaner's upper bound;
        `step_hook(step)`: called when the cleaned files are written ("cleaned") and after each
        swap step (`Log.replace_segments`: "swap", "deleted", "done"); the crash tests kill the
        process there."""
        self.log_manager = log_manager
        self.config = config
        self.high_watermark = high_watermark or (lambda tp: log_manager.logs[tp].log_end_offset)
        self.manager = LogCleanerManager(log_manager.log_dirs)
        self.cleanings = 0  # completed, for tests and `cluster status`
        self._wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None  # run()'s, for deferred file deletions
        self.step_hook = step_hook or (lambda step: None)
        log_manager.deletion_listeners.append(self._on_log_deleted)

    def _on_log_deleted(self, tp: TopicPartition) -> None:
        """A deleted log's checkpoint entry goes (a topic created again under the name starts
        dirty); the file is rewritten at once, deletions being rare."""
        for log_dir in self.manager.forget(tp):
            try:
                checkpoint.write_offsets(*self.manager.checkpoint_snapshot(log_dir))
            except OSError as e:  # an offline dir: the entry goes with the next write that works
                log.warning("cannot rewrite %s's cleaner checkpoint: %s", log_dir, e)

    def _logs(self):
        return {tp: (self.log_manager.dir_of(tp), lg) for tp, lg in self.log_manager.logs.items()}

    def state(self) -> list[LogToClean]:
        """Every compacted log's cleaning state now (dirty ratio and offsets)."""
        return self.manager.logs_to_clean(self._logs(), self.high_watermark)

    def wake(self) -> None:
        """Look for cleanable logs now instead of after the backoff (tests, operators)."""
        self._wakeup.set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Run the cleaner tasks until cancelled (returns at once with log.cleaner.enable=false)."""
        if not self.config.enable:
            log.info("the log cleaner is disabled (log.cleaner.enable=false): compacted logs are not cleaned")
            task_status.started()
            return
        await trio.to_thread.run_sync(self.manager.load_checkpoints)
        async with trio_parallel.open_worker_context(
            idle_timeout=60, init=_init_worker, retire=_retire_after_each_job, grace_period=5
        ) as workers:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for i in range(self.config.threads):
                    nursery.start_soon(self._cleaner_loop, i, workers)
                task_status.started()

    async def _cleaner_loop(self, index: int, workers) -> None:
        while True:
            ltc = self.manager.grab_filthiest_log(self._logs(), self.high_watermark)
            if ltc is None:
                with trio.move_on_after(self.config.backoff_ms / 1000):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                continue
            try:
                await self.clean_log(ltc, workers)
            except Exception:  # a bug or a broken worker must not take the broker down (Kafka:
                # the partition is marked uncleanable and the cleaner goes on)
                log.exception("cleaning %s-%d failed; it will not be cleaned until a restart", *ltc.tp)
                self.manager.mark_uncleanable(ltc.tp)

    async def clean_log(self, ltc: LogToClean, workers=None) -> CleanResult | None:
        """One cleaning of `ltc` (in progress in the manager): worker process, swap, checkpoint."""
        lg, tp = ltc.log, ltc.tp
        log_dir = self.log_manager.dir_of(tp)
        segments = [s for s in lg.segments if s.base_offset < ltc.first_uncleanable_offset]
        task = CleanTask(
            dir=str(lg.dir),
            config=lg.config,
            segments=tuple(SegmentInfo(s.base_offset, s.size) for s in segments),
            first_dirty_offset=ltc.first_dirty_offset,
            uncleanable_offset=ltc.first_uncleanable_offset,
            map_capacity=self.config.map_capacity,
            producer_last_offsets={
                pid: entry.batches[-1].last_offset
                for pid, entry in lg.producer_state.producers.items()
                if entry.batches
            },
            io_bytes_per_second=self.config.io_max_bytes_per_second / self.config.threads,
            read_buffer_size=self.config.io_buffer_size,
            owner_pid=os.getpid(),
            aborted_txns=tuple(
                (t.producer_id, t.first_offset, t.last_offset) for s in lg.segments for t in s.txn_index.entries
            ),
            now_ms=int(time.time() * 1000),
        )
        truncations = lg.truncations
        end_offset = None
        result = None
        try:
            run = workers.run_sync if workers is not None else trio_parallel.run_sync
            result = await run(clean, task, kill_on_cancel=True)
            if self.log_manager.logs.get(tp) is not lg or lg.truncations != truncations:
                log.info("%s-%d changed while it was cleaned; discarding the cleaned segments", *tp)
                await trio.to_thread.run_sync(_discard, lg.dir, result)
                return None
            self.step_hook("cleaned")
            swapped = await self._swap(lg, result)
            if swapped:
                end_offset = result.end_offset
                self._log_result(tp, ltc, result)
                self.cleanings += 1
            return result if swapped else None
        except (CorruptRecordBatch, OverflowError, OSError) as e:
            if self.log_manager.logs.get(tp) is not lg or any(s not in lg.segments for s in segments):
                log.info("%s-%d changed while it was cleaned (%s); it will be cleaned again", *tp, e)
            else:
                log.error("cleaning %s-%d failed, it will not be cleaned until a restart: %s", *tp, e)
                self.manager.mark_uncleanable(tp)
            return None
        finally:
            self.manager.done_cleaning(tp, log_dir, lg, end_offset)
            if end_offset is not None:
                path, offsets = self.manager.checkpoint_snapshot(log_dir)
                try:
                    await trio.to_thread.run_sync(checkpoint.write_offsets, path, offsets)
                except OSError as e:  # the dir failed: the log manager takes it offline on its own I/O
                    log.warning("cannot write %s: %s", path, e)

    async def _swap(self, lg, result: CleanResult) -> bool:
        """Swap every cleaned group in; False (remaining `.cleaned` files removed) when one no
        longer matches the log's segments."""
        for i, (base, replaced) in enumerate(result.groups):
            try:
                deleted = lg.replace_segments(base, list(replaced), self.step_hook)
            except ValueError as e:
                log.info("%s: %s; discarding the rest of this cleaning", lg.dir.name, e)
                rest = CleanResult(result.end_offset, result.groups[i:], result.stats)
                await trio.to_thread.run_sync(_discard, lg.dir, rest)
                return False
            await self._delete_later(deleted, lg.config.file_delete_delay_ms)
        return True

    async def _delete_later(self, paths: list[Path], delay_ms: int) -> None:
        """Remove replaced segments' `.deleted` files `file.delete.delay.ms` from now, in a
        worker thread (Kafka's asynchronous segment deletion); at once when the cleaner is not
        running. Files left by a shutdown meanwhile are removed by the next load."""

        async def later() -> None:
            await trio.sleep(delay_ms / 1000)
            await trio.to_thread.run_sync(unlink_all, paths)

        if self._nursery is None or delay_ms <= 0:
            await trio.to_thread.run_sync(unlink_all, paths)
        else:
            self._nursery.start_soon(later)

    @staticmethod
    def _log_result(tp: TopicPartition, ltc: LogToClean, result: CleanResult) -> None:
        s = result.stats
        mb = 1024 * 1024
        log.info(
            "cleaned %s-%d: dirty section [%d, %d) (dirty ratio %.2f), %.1f MB read for the offset map, "
            "%.1f MB read and %.1f MB written (%.0f%% size reduction), %d of %d records kept, %d keys mapped, "
            "%.2f s (%.1f MB/s)",
            *tp,
            ltc.first_dirty_offset,
            result.end_offset,
            ltc.dirty_ratio,
            s.map_bytes_read / mb,
            s.bytes_read / mb,
            s.bytes_written / mb,
            100 * (1 - s.bytes_written / s.bytes_read) if s.bytes_read else 0,
            s.records_kept,
            s.records_read,
            s.map_entries,
            s.elapsed_s,
            (s.bytes_read / mb) / s.elapsed_s if s.elapsed_s else 0,
        )


def _discard(directory: Path, result: CleanResult) -> None:
    """Remove the `.cleaned` files of groups that were not swapped in."""
    for base, _ in result.groups:
        remove_cleaned(directory, base)
