"""Log behaviour: offsets, epochs, reads, rolls, truncation, retention, flush (Kafka's rules)."""

import pytest
from storage_helpers import batch, delete_old_segments, read_all, values

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch, UnsupportedMagic
from storage.config import LogConfig
from storage.errors import InvalidAppendOffset, OffsetOutOfRange, RecordTooLarge, StorageError
from storage.log import Log
from storage.log_loader import load_log


@pytest.fixture
def log(tmp_path):
    lg = Log.create(tmp_path / "t-0", LogConfig(segment_bytes=1000, index_interval_bytes=100))
    yield lg
    lg.close()


def test_leader_append_assigns_offsets_and_stamps_the_epoch_without_touching_the_crc(log):
    data = batch(3, base_offset=999, epoch=42)
    crc = rb.read_header(data).crc
    info = log.append_as_leader(data, leader_epoch=5)
    assert (info.first_offset, info.last_offset, info.records) == (0, 2, 3)
    info = log.append_as_leader(batch(2), leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (3, 4) and log.log_end_offset == 5
    stored = log.read(0, 10**6).records
    header = rb.read_header(stored)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (0, 5, crc)
    rb.validate_batch(stored, 0, header)
    assert log.epoch_cache.entries == [(5, 0)]
    log.append_as_leader(batch(1), leader_epoch=7)
    assert log.epoch_cache.entries == [(5, 0), (7, 5)]


def test_leader_append_refuses_bad_batches_and_writes_nothing(log):
    good = batch(2)
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordBatch):
        log.append_as_leader(bytes(corrupt), leader_epoch=0)
    old = bytearray(good)
    old[16] = 1
    with pytest.raises(UnsupportedMagic):
        log.append_as_leader(bytes(old), leader_epoch=0)
    with pytest.raises(CorruptRecordBatch):
        log.append_as_leader(b"", leader_epoch=0)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    small = Log.create(log.dir.parent / "small-0", LogConfig(max_message_bytes=100))
    with pytest.raises(RecordTooLarge):
        small.append_as_leader(batch(5, size=50), leader_epoch=0)
    assert small.log_end_offset == 0


def test_follower_append_keeps_offsets_and_requires_increasing_offsets(log):
    log.append_as_follower(batch(2, base_offset=0, epoch=3) + batch(3, base_offset=2, epoch=4))
    assert log.log_end_offset == 5 and log.epoch_cache.entries == [(3, 0), (4, 2)]
    with pytest.raises(InvalidAppendOffset):
        log.append_as_follower(batch(1, base_offset=4, epoch=4))  # below LEO
    with pytest.raises(InvalidAppendOffset):
        log.append_as_follower(batch(2, base_offset=5) + batch(1, base_offset=6))  # overlapping batches
    assert log.log_end_offset == 5
    log.append_as_follower(batch(1, base_offset=5, epoch=4))
    # A compacted leader's gaps are copied as they are, in the same segment.
    log.append_as_follower(batch(1, base_offset=8, epoch=4) + batch(1, base_offset=12, epoch=4))
    assert [o for o, _ in read_all(log)] == [0, 1, 2, 3, 4, 5, 8, 12]
    assert log.log_end_offset == 13 and len(log.segments) == 1
    assert [o for o, _ in values(log.read(6, 10**6).records)] == [8, 12]  # an offset in a gap reads on


def test_read_returns_whole_batches_at_least_one_and_stops_at_max_offset(log):
    for i in range(4):
        log.append_as_leader(batch(3, tag=i, size=30), leader_epoch=0)  # offsets 0-2, 3-5, 6-8, 9-11
    first = log.read(4, max_bytes=1)  # smaller than a batch: still one batch
    assert [o for o, _ in values(first.records)] == [3, 4, 5]
    assert [o for o, _ in values(log.read(4, 10**6, max_offset=9).records)] == [3, 4, 5, 6, 7, 8]
    # max_offset (the HW) inside a batch excludes that batch: a consumer never sees offset >= HW.
    assert log.read(3, 10**6, max_offset=5).records == b""
    assert log.read(4, 10**6, max_offset=4).records == b""  # fetch offset at the HW: nothing yet
    assert log.read(12, 10**6).records == b""  # at LEO: empty, not an error
    with pytest.raises(OffsetOutOfRange):
        log.read(13, 100)
    two = log.read(0, max_bytes=2 * len(batch(3, size=30)))
    assert len(values(two.records)) == 6


def test_roll_on_segment_bytes_message_time_and_full_index(tmp_path):
    by_size = Log.create(tmp_path / "a-0", LogConfig(segment_bytes=500))
    for i in range(10):
        by_size.append_as_leader(batch(2, size=50, tag=i), leader_epoch=0)
    assert len(by_size.segments) > 1 and all(s.size <= 500 for s in by_size.segments[:-1])

    by_time = Log.create(tmp_path / "b-0", LogConfig(segment_ms=1000))
    by_time.append_as_leader(batch(1, ts=10_000), leader_epoch=0)
    by_time.append_as_leader(batch(1, ts=10_900), leader_epoch=0)
    assert len(by_time.segments) == 1
    by_time.append_as_leader(batch(1, ts=11_001), leader_epoch=0)
    assert [s.base_offset for s in by_time.segments] == [0, 2]

    by_index = Log.create(tmp_path / "c-0", LogConfig(index_interval_bytes=0, segment_index_bytes=24))
    for i in range(8):
        by_index.append_as_leader(batch(1, tag=i), leader_epoch=0)
    assert len(by_index.segments) > 1
    for lg in (by_size, by_time, by_index):
        assert [o for o, _ in read_all(lg)] == list(range(lg.log_end_offset))


def test_truncate_to_drops_whole_batches_and_epochs(log):
    log.append_as_leader(batch(5, size=100), leader_epoch=1)  # 0-4
    log.append_as_leader(batch(5, size=100), leader_epoch=2)  # 5-9
    log.append_as_leader(batch(5, size=100), leader_epoch=3)  # 10-14
    assert len(log.segments) >= 2
    assert log.truncate_to(12)
    assert log.log_end_offset == 10 and log.epoch_cache.entries == [(1, 0), (2, 5)]
    assert not log.truncate_to(50)
    log.truncate_to(5)
    assert log.log_end_offset == 5 and [o for o, _ in read_all(log)] == list(range(5))
    log.append_as_leader(batch(1), leader_epoch=4)
    assert log.log_end_offset == 6 and log.epoch_cache.entries == [(1, 0), (4, 5)]


def test_truncate_fully_and_start_at(log):
    log.append_as_leader(batch(3), leader_epoch=1)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_cache.entries) == (100, 100, [])
    assert [s.base_offset for s in log.segments] == [100]
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    log.append_as_follower(batch(2, base_offset=100, epoch=2))
    assert read_all(log)[0][0] == 100


def test_retention_by_bytes_time_and_high_watermark_never_the_active_segment(tmp_path):
    config = LogConfig(segment_bytes=400, retention_bytes=1000)
    lg = Log.create(tmp_path / "r-0", config)
    for i in range(12):
        lg.append_as_leader(batch(2, size=60, ts=1000 * i, tag=i), leader_epoch=i // 4)
    n = len(lg.segments)
    assert delete_old_segments(lg, high_watermark=0) == 0  # nothing wholly below HW 0
    deleted = delete_old_segments(lg, high_watermark=lg.log_end_offset)
    assert deleted > 0 and len(lg.segments) == n - deleted
    assert lg.size - lg.active_segment.size <= 1000 + 400
    assert lg.log_start_offset == lg.segments[0].base_offset
    assert lg.epoch_cache.entries[0][1] == lg.log_start_offset
    assert [o for o, _ in read_all(lg)] == list(range(lg.log_start_offset, lg.log_end_offset))
    assert not list(lg.dir.glob("*.deleted"))

    by_time = Log.create(tmp_path / "s-0", LogConfig(segment_bytes=400, retention_ms=5000))
    for i in range(10):
        by_time.append_as_leader(batch(2, size=60, ts=1000 * i), leader_epoch=0)
    delete_old_segments(by_time, by_time.log_end_offset, now_ms=100_000)  # everything expired
    assert len(by_time.segments) == 1 and by_time.log_start_offset == by_time.active_segment.base_offset


def test_log_append_time(tmp_path):
    lg = Log.create(tmp_path / "l-0", LogConfig(message_timestamp_type="LogAppendTime"))
    info = lg.append_as_leader(batch(2, ts=5), leader_epoch=0, now_ms=1_700_000_000_000)
    assert info.log_append_time == 1_700_000_000_000
    header = rb.read_header(lg.read(0, 10**6).records)
    assert header.is_log_append_time and header.max_timestamp == 1_700_000_000_000
    rb.validate_batch(lg.read(0, 10**6).records, 0, header)


def test_timestamp_lookup(log):
    for i in range(6):
        log.append_as_leader(batch(2, ts=1000 * i, size=100, tag=i), leader_epoch=0)
    assert log.fetch_offset_by_timestamp(0) == (0, 0)
    assert log.fetch_offset_by_timestamp(2001) == (5, 2001)
    assert log.fetch_offset_by_timestamp(2500) == (6, 3000)
    assert log.fetch_offset_by_timestamp(10**9) is None


def test_flush_messages_one_fsyncs_every_append(tmp_path):
    lg = Log.create(tmp_path / "f-0", LogConfig(flush_messages=1))
    lg.append_as_leader(batch(2), leader_epoch=0)
    assert lg.recovery_point == 2
    default = Log.create(tmp_path / "g-0", LogConfig())
    default.append_as_leader(batch(2), leader_epoch=0)
    assert default.recovery_point == 0  # Kafka's default: replication, not fsync
    default.flush()
    assert default.recovery_point == 2


def test_reopen_after_clean_close(tmp_path, log):
    for i in range(8):
        log.append_as_leader(batch(3, size=80, tag=i), leader_epoch=i)
    before, leo, epochs = read_all(log), log.log_end_offset, list(log.epoch_cache.entries)
    log.close()
    again = load_log(log.dir, log.config, clean_shutdown=True, recovery_point=leo)
    assert (again.log_end_offset, read_all(again), again.epoch_cache.entries) == (leo, before, epochs)
    again.close()


def test_a_corrupt_batch_is_never_served(log):
    for i in range(3):
        log.append_as_leader(batch(2, size=50, tag=i), leader_epoch=0)
    appended = bytes(log.read(0, 10**6).records)
    seg = log.active_segment
    with open(seg.log_path, "r+b") as f:
        f.seek(70)
        f.write(b"\xff")
    # the last appends are read from memory (storage/tail_cache.py): what was appended, not the
    # damaged file; once they are read from the file, the damage is found
    assert log.read(0, 10**6).records == appended and appended[70] != 0xFF
    log.roll()
    with pytest.raises(StorageError, match="CRC"):
        log.read(0, 10**6)


def test_read_reports_the_next_offset(log):
    for i in range(5):
        log.append_as_leader(batch(3, size=100, tag=i), leader_epoch=0)
    info = log.read(4, max_bytes=1)
    assert info.next_offset == 6 and [o for o, _ in values(info.records)][-1] == 5
    assert log.read(15, 100).next_offset == 15
    assert log.read(0, 10**6, max_offset=7).next_offset == 6


def test_a_full_disk_is_a_storage_error_and_the_log_keeps_only_whole_appends(log, monkeypatch):
    import errno
    import os

    import storage.segment

    log.append_as_leader(batch(2), leader_epoch=0)
    size, leo = log.size, log.log_end_offset

    def full(fd, buffers, position):
        os.pwrite(fd, bytes(buffers[0])[:10], position)  # a torn write, then ENOSPC
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.segment.os, "pwritev", full)
    with pytest.raises(StorageError, match="No space left") as failed:
        log.append_as_leader(batch(3), leader_epoch=0)
    assert failed.value.error_code == 56  # KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    assert (log.log_end_offset, read_all(log)[-1][0]) == (leo, leo - 1)
    log.append_as_leader(batch(1), leader_epoch=0)  # space again: appends go on after the last whole one
    assert log.log_end_offset == leo + 1 and log.size > size


def test_a_follower_copying_a_compacted_head_keeps_its_log_start_offset(log):
    # the leader's offsets 0-4 were compacted away: its first batch starts at 5, its log start is 0
    log.append_as_follower(batch(2, base_offset=5, epoch=1))
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 7, 1)
    assert [o for o, _ in values(log.read(0, 10**6).records)] == [5, 6]  # a read from 0 gets them
