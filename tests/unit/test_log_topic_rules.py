"""What a topic's configs make the leader do to an append (Kafka's LogValidator): compression.type
recompresses, message.timestamp.before/after.max.ms bound CreateTime timestamps; and segment.jitter.ms."""

import pytest
from storage_helpers import batch, values

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.errors import InvalidTimestamp
from storage.log import Log
from storage.segment import LogSegment

RECORDS = [(b"k%d" % i, b"value-%d " % i * 30, [("h", b"%d" % i)], 1_000_000 + i) for i in range(10)]


def stored_batches(log):
    data = log.read(0, 1 << 20).records
    return [(header, rb.decode_records(data, pos, header)) for pos, header in rb.iter_batches(data)]


@pytest.mark.parametrize(
    "target,sent",
    [("lz4", rb.GZIP), ("gzip", rb.NONE), ("uncompressed", rb.ZSTD), ("zstd", rb.SNAPPY), ("snappy", rb.LZ4)],
)
def test_compression_type_recompresses_batches_with_another_codec(tmp_path, target, sent):
    log = Log.create(tmp_path / "t-0", LogConfig(compression_type=target))
    original = rb.build_batch(RECORDS, compression=sent, producer_id=7, producer_epoch=1, base_sequence=0)
    info = log.append_as_leader(original, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (0, 9)
    ((header, records),) = stored_batches(log)
    rb.validate_batch(log.read(0, 1 << 20).records, 0, header)
    assert rb.CODEC_NAMES[header.compression] == ("none" if target == "uncompressed" else target)
    before = rb.read_header(original)
    # everything but the codec, length and CRC as the producer sent it; records identical
    assert (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.max_timestamp,
        header.records_count,
        header.partition_leader_epoch,
    ) == (7, 1, 0, before.max_timestamp, 10, 3)
    assert [(r.key, r.value, r.headers, r.timestamp) for r in records] == [
        (r.key, r.value, r.headers, r.timestamp) for r in rb.decode_records(original)
    ]
    # a batch already in the target codec is stored as sent, byte for byte
    codec = header.compression
    again = rb.build_batch(RECORDS, compression=codec)
    log.append_as_leader(again, leader_epoch=3)
    assert log.read(10, 1 << 20).records[16:] == again[16:]
    log.close()


def test_compression_type_producer_keeps_each_batch_as_sent(tmp_path):
    log = Log.create(tmp_path / "t-0", LogConfig())
    log.append_as_leader(rb.build_batch(RECORDS, compression=rb.SNAPPY), 0)
    log.append_as_leader(rb.build_batch(RECORDS, compression=rb.NONE), 0)
    assert [h.compression for h, _ in stored_batches(log)] == [rb.SNAPPY, rb.NONE]
    log.close()


def test_compression_levels_reach_the_codec(tmp_path):
    sizes = {}
    for level in (1, 9):
        log = Log.create(tmp_path / f"t-{level}", LogConfig(compression_type="gzip", compression_gzip_level=level))
        log.append_as_leader(rb.build_batch([(None, bytes(range(256)) * 8 + b"%d" % i) for i in range(50)]), 0)
        sizes[level] = log.size
        log.close()
    assert sizes[9] < sizes[1]


def test_create_time_outside_the_bounds_is_refused_and_nothing_is_written(tmp_path):
    log = Log.create(
        tmp_path / "t-0", LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100)
    )
    now = 5_000_000
    log.append_as_leader(batch(3, ts=now - 1000), 0, now_ms=now)  # exactly at the bounds' edges
    log.append_as_leader(batch(1, ts=now + 100), 0, now_ms=now)
    for ts in (now - 1001, now + 101):
        with pytest.raises(InvalidTimestamp, match="out of range"):
            log.append_as_leader(batch(1, ts=ts), 0, now_ms=now)
    # one record in the middle of a batch is enough (every record is checked, compressed ones too)
    records = [(None, b"v", [], now), (None, b"v", [], now - 5000), (None, b"v", [], now)]
    with pytest.raises(InvalidTimestamp):
        log.append_as_leader(rb.build_batch(records, compression=rb.LZ4), 0, now_ms=now)
    assert log.log_end_offset == 4
    log.close()


def test_log_append_time_topics_ignore_the_bounds(tmp_path):
    log = Log.create(
        tmp_path / "t-0",
        LogConfig(
            message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0
        ),
    )
    log.append_as_leader(batch(2, ts=1), 0, now_ms=5_000_000)
    assert values(log.read(0, 1 << 20).records)[0][0] == 0
    log.close()


def test_segment_jitter_rolls_each_segment_up_to_that_much_early(tmp_path):
    config = LogConfig(segment_ms=1000, segment_jitter_ms=400)
    jitters = {LogSegment(tmp_path, i * 100, config, new=True).roll_jitter_ms for i in range(40)}
    assert all(0 <= j < 400 for j in jitters) and len(jitters) > 1
    segment = LogSegment(tmp_path, 9000, config, new=True)
    segment.roll_jitter_ms = 300
    segment.append([batch(1, ts=0, base_offset=9000)], len(batch(1)), 9000, 0, 9000)
    assert not segment.should_roll(10, max_timestamp=700, max_offset=9001)
    assert segment.should_roll(10, max_timestamp=701, max_offset=9001)
    assert LogSegment(tmp_path, 20000, LogConfig(segment_ms=1000)).roll_jitter_ms == 0
