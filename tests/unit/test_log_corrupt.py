"""Corrupt files on disk: each has a defined outcome (truncate, rebuild, or a clear error), never a
crash loop and never data served from a bad batch."""

import logging

import pytest
import trio
from storage_helpers import batch, read_all, values

from storage import checkpoint
from storage.config import LogConfig
from storage.errors import StorageError
from storage.log import Log
from storage.log_loader import load_log
from storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=100)


def make_log(path, batches=12):
    log = Log.create(path, CONFIG)
    for i in range(batches):
        log.append_as_leader(batch(3, size=80, tag=i), leader_epoch=i // 4)
    records, leo, epochs = read_all(log), log.log_end_offset, list(log.epoch_cache.entries)
    log.close()
    return records, leo, epochs


def flip_byte(path, position):
    data = bytearray(path.read_bytes())
    data[position] ^= 0x55
    path.write_bytes(bytes(data))


def second_batch_position(path):
    from storage.segment import LogSegment

    seg = LogSegment(path.parent, int(path.stem), CONFIG)
    pos = [p for p, _ in seg.headers(0)][1]
    seg.close()
    return pos


# A byte inside the records (caught by the CRC) or inside a base offset (outside the CRC, caught
# by the offset chain).
WHERE = {"records": (70, "CRC"), "base-offset": (6, "base offset|does not hold")}


@pytest.mark.parametrize("where", WHERE)
def test_flipped_byte_mid_log_is_cut_by_recovery(tmp_path, where):
    records, leo, _ = make_log(tmp_path / "t-0")
    first = sorted((tmp_path / "t-0").glob("*.log"))[0]
    pos = second_batch_position(first)
    flip_byte(first, pos + WHERE[where][0])
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=False, recovery_point=0)
    got = read_all(log)
    assert got == records[:3]  # cut at the second batch, the first one kept
    assert len(log.segments) == 1  # segments after the cut are gone: offsets stay contiguous
    log.append_as_leader(batch(1), leader_epoch=9)  # and the log goes on from the cut
    assert read_all(log)[-1][0] == log.log_end_offset - 1 == 3


@pytest.mark.parametrize("where", WHERE)
def test_flipped_byte_after_a_clean_shutdown_is_a_clear_read_error(tmp_path, where):
    make_log(tmp_path / "t-0")
    first = sorted((tmp_path / "t-0").glob("*.log"))[0]
    flip_byte(first, second_batch_position(first) + WHERE[where][0])
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=10**6)
    assert [o for o, _ in values(log.read(0, 1).records)] == [0, 1, 2]  # the batch before is fine
    with pytest.raises(StorageError, match=WHERE[where][1]):
        log.read(3, 10**6)


def test_torn_tail_is_cut(tmp_path):
    records, leo, _ = make_log(tmp_path / "t-0")
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    one = batch(2, tag=99)
    with open(last, "ab") as f:
        f.write(one[: len(one) // 2])
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=False, recovery_point=leo)
    assert read_all(log) == records and log.log_end_offset == leo


@pytest.mark.parametrize("damage", ["truncate-odd", "delete", "garbage", "delete-timeindex"])
def test_damaged_index_is_rebuilt(tmp_path, damage):
    records, leo, _ = make_log(tmp_path / "t-0")
    index = sorted((tmp_path / "t-0").glob("*.index"))[0]
    if damage == "truncate-odd":
        index.write_bytes(index.read_bytes()[:-3])
    elif damage == "delete":
        index.unlink()
    elif damage == "garbage":
        index.write_bytes(b"\x7f\xff\xff\xff" * 4)
    else:
        index.with_suffix(".timeindex").unlink()
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=leo)
    assert read_all(log) == records
    assert len(log.segments[0].offset_index) > 0  # rebuilt, not just ignored
    assert log.fetch_offset_by_timestamp(0) == (0, 1_000_000)


def test_garbage_leader_epoch_checkpoint_is_rebuilt_from_batch_headers(tmp_path):
    records, leo, epochs = make_log(tmp_path / "t-0")
    (tmp_path / "t-0" / checkpoint.LEADER_EPOCH_CHECKPOINT).write_text("0\n7\nnonsense\n")
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=leo)
    assert log.epoch_cache.entries == epochs and read_all(log) == records


def test_garbage_recovery_checkpoint_means_full_recovery(tmp_path, caplog):
    async def scenario():
        manager = LogManager([tmp_path / "d1"], CONFIG)
        await trio.to_thread.run_sync(manager.startup)
        log = manager.get_or_create_log(("t", 0))
        for i in range(6):
            log.append_as_leader(batch(2, size=50, tag=i), leader_epoch=0)
        expected = read_all(log)
        manager.shutdown()
        (tmp_path / "d1" / checkpoint.RECOVERY_POINT_CHECKPOINT).write_bytes(b"\x00garbage")
        (tmp_path / "d1" / checkpoint.LOG_START_OFFSET_CHECKPOINT).write_text("0\n1\nt 0 abc\n")
        (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE).unlink()
        again = LogManager([tmp_path / "d1"], CONFIG)
        with caplog.at_level(logging.WARNING):
            again.startup()
        assert read_all(again.get_log(("t", 0))) == expected
        assert "recovering every segment" in caplog.text and "fall back" in caplog.text
        again.shutdown()

    trio.run(scenario)


def test_a_tail_cut_mid_batch_after_a_clean_shutdown_is_cut_at_start(tmp_path, caplog):
    records, leo, _ = make_log(tmp_path / "t-0")
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-40])  # the last batch loses its end
    with caplog.at_level(logging.WARNING):
        log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=leo)
    assert "tail is damaged although the shutdown was clean" in caplog.text
    assert read_all(log) == records[:-3] and log.log_end_offset == leo - 3
    log.append_as_leader(batch(1), leader_epoch=9)  # and it takes appends again
    assert log.log_end_offset == leo - 2


def test_flipped_bytes_in_the_active_segments_tail_after_a_clean_shutdown_are_cut_at_start(tmp_path):
    records, leo, _ = make_log(tmp_path / "t-0")
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    size = last.stat().st_size
    for offset in range(16):  # 16 bytes inside the last batch's records
        flip_byte(last, size - 30 + offset)
    log = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, recovery_point=leo)
    assert read_all(log) == records[:-3]  # the damaged batch is gone; what was before it is served
