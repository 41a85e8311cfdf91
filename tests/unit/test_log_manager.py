"""LogManager: dirs, clean-shutdown marker, lock, checkpoints, and its periodic trio tasks."""

import pytest
import trio
from storage_helpers import batch, read_all

from storage import checkpoint
from storage.config import LogConfig
from storage.errors import LogDirInUse
from storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, parse_partition_dir


def test_partition_dir_names():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("topic") is None and parse_partition_dir("t-x") is None


async def test_startup_shutdown_checkpoints_and_marker(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, LogConfig())
    await trio.to_thread.run_sync(manager.startup)
    logs = {tp: manager.get_or_create_log(tp) for tp in [("x", 0), ("x", 1), ("y", 0), ("y", 1)]}
    assert sorted(len(list(d.iterdir())) for d in dirs) == [3, 3]  # 2 partitions + .lock each
    for i, log in enumerate(logs.values()):
        log.append_as_leader(batch(i + 1), leader_epoch=0)
    manager.write_high_watermarks({("x", 0): 1, ("y", 1): 3})
    manager.shutdown()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        rp = checkpoint.read_offsets(d / checkpoint.RECOVERY_POINT_CHECKPOINT)
        assert rp and all(
            v == tp_count for (t, p), v in rp.items() for tp_count in [dict(zip(logs, range(1, 5)))[(t, p)]]
        )
    again = LogManager(dirs, LogConfig())
    again.startup()
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # a crash now is detected
    assert again.loaded_high_watermarks == {("x", 0): 1, ("y", 1): 3}
    assert {tp: lg.log_end_offset for tp, lg in again.logs.items()} == {tp: i + 1 for i, tp in enumerate(logs)}
    again.shutdown()


def test_a_log_dir_in_use_is_refused(tmp_path):
    first = LogManager([tmp_path / "a"], LogConfig())
    first.startup()
    with pytest.raises(LogDirInUse):
        LogManager([tmp_path / "a"], LogConfig()).startup()
    first.shutdown()
    LogManager([tmp_path / "a"], LogConfig()).startup()


async def test_periodic_flush_checkpoint_and_retention(tmp_path):
    config = LogConfig(flush_ms=0, segment_bytes=300, retention_bytes=300)
    manager = LogManager(
        [tmp_path / "a"], config, flush_check_interval_ms=20, checkpoint_interval_ms=20, retention_check_interval_ms=20
    )
    manager.startup()
    log = manager.get_or_create_log(("t", 0))
    for i in range(10):
        log.append_as_leader(batch(2, size=60, tag=i), leader_epoch=0)
    assert log.recovery_point == 0 and len(log.segments) > 2
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        with trio.fail_after(5):
            while (
                log.recovery_point < log.log_end_offset
                or len(log.segments) > 2
                or checkpoint.read_offsets(tmp_path / "a" / checkpoint.RECOVERY_POINT_CHECKPOINT)
                != {("t", 0): log.log_end_offset}
            ):
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert log.log_start_offset > 0
    assert read_all(log)[-1][0] == log.log_end_offset - 1
    manager.shutdown()
