"""Kafka's on-disk formats, byte for byte: file names, index entries, checkpoint text."""

import struct

import pytest
from storage_helpers import batch

from storage import checkpoint
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochCache
from storage.errors import CorruptCheckpoint
from storage.log import Log
from storage.segment import file_name


def test_segment_file_names_are_twenty_digit_base_offsets(tmp_path):
    assert file_name(0, ".log") == "00000000000000000000.log"
    assert file_name(1234567, ".timeindex") == "00000000000001234567.timeindex"
    log = Log.create(tmp_path / "topic-a-0", LogConfig(segment_bytes=300))
    for i in range(6):
        log.append_as_leader(batch(2, tag=i), leader_epoch=0)
    names = sorted(p.name for p in (tmp_path / "topic-a-0").glob("*.log"))
    assert names[0] == "00000000000000000000.log" and len(names) > 1
    assert all(len(n) == 24 and n[:20].isdigit() for n in names)


def test_offset_and_time_index_entries(tmp_path):
    config = LogConfig(index_interval_bytes=100, segment_index_bytes=80)
    log = Log.create(tmp_path / "t-0", config)
    positions, sizes = [], []
    for i in range(5):
        positions.append(log.active_segment.size)
        data = batch(3, ts=5000 + 10 * i, size=60, tag=i)
        sizes.append(len(data))
        log.append_as_leader(data, leader_epoch=0)
    seg = log.active_segment
    log.flush()  # index entries reach the file on flush, roll and close (as Kafka's mmap'd pages)
    raw = seg.offset_index.path.read_bytes()
    assert len(raw) == 80  # the active index is preallocated to segment.index.bytes
    # An entry is written when more than 100 bytes were appended since the last: batches 1..4
    # (each entry: last offset of the batch relative to base, position of the batch).
    entries = [struct.unpack_from(">ii", raw, 8 * i) for i in range(len(seg.offset_index))]
    assert entries == [(3 * i + 2, positions[i]) for i in range(1, 5)]
    assert raw[8 * len(entries) :] == b"\0" * (80 - 8 * len(entries))
    traw = seg.time_index.path.read_bytes()
    tentries = [struct.unpack_from(">qi", traw, 12 * i) for i in range(len(seg.time_index))]
    assert tentries == [(5000 + 10 * i + 2, 3 * i + 2) for i in range(1, 5)]
    log.roll()  # rolling trims both files to their entries (plus the final time index entry)
    assert len(seg.offset_index.path.read_bytes()) == 8 * len(entries)
    assert len(seg.time_index.path.read_bytes()) % 12 == 0


def test_offset_checkpoint_text_format(tmp_path):
    path = tmp_path / checkpoint.RECOVERY_POINT_CHECKPOINT
    checkpoint.write_offsets(path, {("b", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert checkpoint.read_offsets(path) == {("a", 0): 42, ("b", 1): 7}
    assert not path.with_name(path.name + ".tmp").exists()


def test_leader_epoch_checkpoint_text_format(tmp_path):
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    cache.assign(0, 0)
    cache.assign(3, 150)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 150\n"


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "line 1"),
        ("1\n0\n", "version"),
        ("0\nx\n", "entry count"),
        ("0\n2\na 0 1\n", "count line"),
        ("0\n1\na 0\n", "3 fields"),
        ("0\n1\na zero 1\n", "not an integer"),
        ("\xff\xfe", None),
    ],
)
def test_garbage_checkpoints_are_a_clear_error(tmp_path, text, message):
    path = tmp_path / "cp"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CorruptCheckpoint, match=message):
        checkpoint.read_offsets(path)


def test_missing_checkpoint_is_empty(tmp_path):
    assert checkpoint.read_offsets(tmp_path / "none") == {}
