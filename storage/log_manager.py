"""All partition logs of one broker, across `log.dirs` (Kafka `LogManager`).

Layout of each log dir: one `<topic>-<partition>/` directory per replica, plus
`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`, `replication-offset-checkpoint`
(high watermarks, written for the replica manager), `.lock` (held with flock while this process
uses the dir) and `.kafka_cleanshutdown` (written last on a clean shutdown, removed at startup, so
its absence at startup means the previous run crashed and recovery runs).

A corrupt checkpoint never stops startup and never loses data: recovery points fall back to 0
(full recovery), log start offsets to the first segment's base offset, high watermarks to none
(the replica manager starts them at the log start offset). Each case is logged.

`run()` owns the periodic tasks (trio, in its own nursery): time-based flushes (`flush.ms`),
checkpoints (`log.flush.offset.checkpoint.interval.ms`, default 60 s) and retention
(`log.retention.check.interval.ms`, default 300 s), which also expires idle producer ids
(`producer.id.expiration.ms`). fsync and file deletion go through
`trio.to_thread`; state changes stay on the trio thread.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import trio

from protocol.topic_names import validate_topic_name
from protocol.topic_partition import TopicPartition
from storage import checkpoint
from storage.config import LogConfig
from storage.errors import CorruptCheckpoint, KafkaStorageError, LogDirInUse, UnsafeLogPath
from storage.log import DELETE_DIR_SUFFIX, Log, fsync_fds
from storage.log_loader import load_log
from storage.scheduler import run_periodically

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"


def partition_dir(log_dir: Path, tp: TopicPartition) -> Path:
    """`<log_dir>/<topic>-<partition>`, Kafka's partition directory. Raises InvalidTopic for a topic
    name that breaks Kafka's rule and UnsafeLogPath for a partition index below 0 or any path that
    would not be a direct child of `log_dir` (belt and braces: a legal name never is)."""
    validate_topic_name(tp[0])
    path = log_dir / f"{tp[0]}-{tp[1]}"
    if not isinstance(tp[1], int) or tp[1] < 0 or path.resolve().parent != log_dir.resolve():
        raise UnsafeLogPath(f"refusing partition directory {path} for {tp!r}: it is not inside {log_dir}")
    return path


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`my-topic-3` -> ("my-topic", 3); None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        config: LogConfig,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        flush_check_interval_ms: int = 1000,
        checkpoint_interval_ms: int = 60000,
        retention_check_interval_ms: int = 300000,
    ):
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config = config
        self.topic_config = topic_config or (lambda topic: config)
        self.flush_check_interval_ms = flush_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._locks: list[int] = []
        self.loaded_high_watermarks: dict[TopicPartition, int] = {}
        self.offline_dirs: set[Path] = set()  # log dirs taken offline by an I/O error (until restart)
        # called with the partition after its log is deleted (the log cleaner forgets its checkpoint)
        self.deletion_listeners: list[Callable[[TopicPartition], None]] = []

    # ---- startup and shutdown ----------------------------------------------------------------
    def startup(self) -> None:
        """Lock the dirs, read checkpoints, load (and if needed recover) every log. Blocking:
        a trio caller runs it with `trio.to_thread.run_sync`. Raises LogDirInUse."""
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self._unlock()
                raise LogDirInUse(f"{d} is locked by another process") from None
            self._locks.append(fd)
        for d in self.log_dirs:
            self._load_dir(d)

    def _read_checkpoint(self, path: Path, fallback: str) -> dict[TopicPartition, int]:
        try:
            return checkpoint.read_offsets(path)
        except CorruptCheckpoint as e:
            log.warning("%s; %s", e, fallback)
            return {}

    def _load_dir(self, d: Path) -> None:
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery = self._read_checkpoint(
            d / checkpoint.RECOVERY_POINT_CHECKPOINT, "recovering every segment of this dir"
        )
        starts = self._read_checkpoint(
            d / checkpoint.LOG_START_OFFSET_CHECKPOINT, "log start offsets fall back to the first segments"
        )
        self.loaded_high_watermarks.update(
            self._read_checkpoint(
                d / checkpoint.REPLICATION_CHECKPOINT, "high watermarks restart at the log start offsets"
            )
        )
        for child in d.iterdir():
            if child.is_dir() and child.name.endswith(DELETE_DIR_SUFFIX):
                log.info("removing %s, a partition deletion a crash interrupted", child)
                shutil.rmtree(child, ignore_errors=True)
        children = sorted(d.iterdir())
        if not clean and any(parse_partition_dir(c.name) for c in children if c.is_dir()):
            log.warning("%s: no clean shutdown marker; recovering logs after their recovery points", d)
        for child in children:
            tp = parse_partition_dir(child.name) if child.is_dir() else None
            if tp is None:
                continue
            if tp in self.logs:
                raise LogDirInUse(f"{tp} exists in both {self._dir_of[tp]} and {d}")
            self.logs[tp] = load_log(
                child,
                self.topic_config(tp[0]),
                clean_shutdown=clean,
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
            )
            self._dir_of[tp] = d
        marker.unlink(missing_ok=True)
        checkpoint.fsync_dir(d)

    def shutdown(self) -> None:
        """Flush everything, write all checkpoints, close the logs, then mark each dir clean."""
        for lg in self.logs.values():
            lg.flush()
        self.checkpoint_all()
        for lg in self.logs.values():
            lg.close()
        for d in self.log_dirs:
            if d in self.offline_dirs:  # not clean: the next start recovers what it can there
                continue
            (d / CLEAN_SHUTDOWN_FILE).touch()
            checkpoint.fsync_dir(d)
        self.logs.clear()
        self._unlock()

    def _unlock(self) -> None:
        for fd in self._locks:
            os.close(fd)
        self._locks = []

    # ---- logs ----------------------------------------------------------------------------------
    def reconfigure(self, topics: set[str] | None = None) -> int:
        """Give the logs of `topics` (None: every log) their topic's current config (a config
        change arrived); returns how many logs were updated. Retention and rolling use the new
        values from their next check."""
        updated = 0
        for tp, lg in list(self.logs.items()):
            if topics is None or tp[0] in topics:
                lg.update_config(self.topic_config(tp[0]))
                updated += 1
        return updated

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def dir_of(self, tp: TopicPartition) -> Path:
        """The log dir holding `tp`'s log (KeyError when there is none)."""
        return self._dir_of[tp]

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The log of `tp`, created in the log dir holding the fewest partitions if new. Raises
        InvalidTopic / UnsafeLogPath (`partition_dir`) and creates nothing for a bad name."""
        if tp in self.logs:
            return self.logs[tp]
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaStorageError(
                f"no online log dir for {tp[0]}-{tp[1]}: {sorted(map(str, self.offline_dirs))} failed"
            )
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        d = min(online, key=lambda x: counts[x])
        lg = Log.create(partition_dir(d, tp), config or self.topic_config(tp[0]))
        self.logs[tp], self._dir_of[tp] = lg, d
        return lg

    def mark_offline(self, log_dir: Path) -> list[TopicPartition]:
        """Take `log_dir` offline (Kafka's LogDirFailureChannel): its logs are closed (as far as
        the failing disk allows) and dropped, no new log goes there, and its checkpoints are no
        longer written. Returns the partitions it held; none when it was offline already."""
        failed = next((d for d in self.log_dirs if d.resolve() == Path(log_dir).resolve()), None)
        if failed is None or failed in self.offline_dirs:
            return []
        self.offline_dirs.add(failed)
        log_dir = failed
        lost = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in lost:
            lg = self.logs.pop(tp)
            del self._dir_of[tp]
            try:
                lg.close()
            except OSError as e:
                log.warning("closing %s-%d in the failed dir %s: %s", *tp, log_dir, e)
        log.error("log dir %s is offline (%d partitions): %s", log_dir, len(lost), sorted(lost))
        return lost

    def delete_log(self, tp: TopicPartition) -> None:
        """Close and remove the log of `tp` with its directory; a directory that is not the
        partition's own inside its log dir is refused (logged, UnsafeLogPath) and kept."""
        lg = self.logs.get(tp)
        if lg is None:
            return
        expected = partition_dir(self._dir_of[tp], tp)
        if lg.dir.resolve() != expected.resolve():
            log.error("refusing to delete %s: %s-%d lives in %s", lg.dir, *tp, expected)
            raise UnsafeLogPath(f"refusing to delete {lg.dir}: not the partition directory {expected}")
        del self.logs[tp], self._dir_of[tp]
        lg.delete()
        for listener in self.deletion_listeners:
            listener(tp)

    # ---- checkpoints ---------------------------------------------------------------------------
    def _per_dir(self, value: Callable[[TopicPartition, Log], int]) -> dict[Path, dict[TopicPartition, int]]:
        out: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs if d not in self.offline_dirs}
        for tp, lg in self.logs.items():
            out[self._dir_of[tp]][tp] = value(tp, lg)
        return out

    def checkpoint_snapshot(self) -> list[tuple[Path, dict[TopicPartition, int]]]:
        """The checkpoint files to write now, as (path, offsets); taken on the owner's thread."""
        return [
            (d / checkpoint.RECOVERY_POINT_CHECKPOINT, offsets)
            for d, offsets in self._per_dir(lambda tp, lg: lg.recovery_point).items()
        ] + [
            (d / checkpoint.LOG_START_OFFSET_CHECKPOINT, offsets)
            for d, offsets in self._per_dir(lambda tp, lg: lg.log_start_offset).items()
        ]

    @staticmethod
    def write_checkpoints(snapshot: list[tuple[Path, dict[TopicPartition, int]]]) -> None:
        """Write a `checkpoint_snapshot()`; safe in a worker thread."""
        for path, offsets in snapshot:
            checkpoint.write_offsets(path, offsets)

    def checkpoint_all(self) -> None:
        """Write the recovery-point and log-start-offset checkpoints of every dir."""
        self.write_checkpoints(self.checkpoint_snapshot())

    def high_watermark_snapshot(self, high_watermarks: dict[TopicPartition, int]):
        """`replication-offset-checkpoint` of every dir for the partitions it holds, as a
        snapshot for `write_checkpoints` (taken on the owner's thread)."""
        return [
            (
                d / checkpoint.REPLICATION_CHECKPOINT,
                {tp: hw for tp, hw in high_watermarks.items() if self._dir_of.get(tp) == d},
            )
            for d in self.log_dirs
            if d not in self.offline_dirs
        ]

    def write_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Write `replication-offset-checkpoint` in every dir for the partitions it holds."""
        self.write_checkpoints(self.high_watermark_snapshot(high_watermarks))

    # ---- periodic work ---------------------------------------------------------------------------
    async def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync (in a worker thread) every log whose last flush is older than its flush.ms."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        flushed = 0
        for lg in list(self.logs.values()):
            if lg.recovery_point < lg.log_end_offset and now - lg.last_flush_ms >= lg.config.flush_ms:
                fds, offset = lg.flush_plan()
                await trio.to_thread.run_sync(fsync_fds, fds)
                lg.complete_flush(offset)
                flushed += 1
        return flushed

    async def apply_retention(
        self, now_ms: int | None = None, high_watermark: Callable[[TopicPartition], int] | None = None
    ) -> int:
        """Detach expired segments (trio thread), delete their files (worker thread). Segments at
        or above `high_watermark(tp)` (default: the LEO) are never deleted."""
        deleted = 0
        for tp, lg in list(self.logs.items()):
            expired = lg.producer_state.remove_expired()
            if expired:
                log.info("%s-%d: producer ids %s expired (producer.id.expiration.ms)", *tp, expired)
            hw = high_watermark(tp) if high_watermark else lg.log_end_offset
            doomed = lg.detach_old_segments(hw, now_ms)
            for segment in doomed:
                await trio.to_thread.run_sync(segment.delete)
            deleted += len(doomed)
        return deleted

    async def run(
        self, high_watermark: Callable[[TopicPartition], int] | None = None, *, task_status=trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the periodic tasks (flush, checkpoints, retention) until cancelled; retention keeps
        what is at or above `high_watermark(tp)` (the replica manager's HW of each partition)."""

        async def write_checkpoints() -> None:
            await trio.to_thread.run_sync(self.write_checkpoints, self.checkpoint_snapshot())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                run_periodically, "log flush", self.flush_check_interval_ms / 1000, self.flush_dirty_logs
            )
            nursery.start_soon(
                run_periodically, "log checkpoints", self.checkpoint_interval_ms / 1000, write_checkpoints
            )
            nursery.start_soon(
                run_periodically,
                "log retention",
                self.retention_check_interval_ms / 1000,
                functools.partial(self.apply_retention, high_watermark=high_watermark),
            )
            task_status.started()
