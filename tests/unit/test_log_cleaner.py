"""The log cleaner's core on real segment files (no broker): what a cleaning keeps, removes and
rewrites, where it stops, and the swap (Kafka's `Cleaner`, `LocalLog.replaceSegments`)."""

import os
import time

import pytest
from storage_helpers import delete_old_segments, keyed_batch, latest_by_key, read_all

from protocol import record_batch as rb
from storage.append_origin import AppendOrigin
from storage.cleaner.cleaner import CleanTask, SegmentInfo, clean, group_segments
from storage.cleaner.offset_map import OffsetMap, capacity_for
from storage.config import LogConfig
from storage.log import Log
from storage.log_loader import load_log
from storage.segment import unlink_all

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200, cleanup_policy=("compact",))


def task_for(log: Log, first_dirty: int = 0, *, capacity: int = 10_000, producers=None, now_ms=None) -> CleanTask:
    """A task over every inactive segment, as the cleaner manager builds it."""
    inactive = log.segments[:-1]
    return CleanTask(
        dir=str(log.dir),
        config=log.config,
        segments=tuple(SegmentInfo(s.base_offset, s.size) for s in inactive),
        first_dirty_offset=first_dirty,
        uncleanable_offset=log.active_segment.base_offset,
        map_capacity=capacity,
        producer_last_offsets=producers or {},
        now_ms=now_ms or int(time.time() * 1000),
        aborted_txns=tuple(
            (t.producer_id, t.first_offset, t.last_offset) for s in log.segments for t in s.txn_index.entries
        ),
    )


def run_cleaning(log: Log, task: CleanTask):
    result = clean(task)
    for base, replaced in result.groups:
        unlink_all(log.replace_segments(base, list(replaced)))
    return result


def fill(log: Log, rounds: int, keys: int, *, tombstone_every: int = 0, compression=rb.NONE):
    """`rounds` batches, each writing every key once (value names the round)."""
    for r in range(rounds):
        records = []
        for k in range(keys):
            dead = tombstone_every and r == rounds - 1 and k % tombstone_every == 0
            records.append((b"k%d" % k, None if dead else b"v%d-%d" % (k, r)))
        log.append_as_leader(keyed_batch(records, compression=compression), leader_epoch=0)


@pytest.mark.parametrize("compression", [rb.NONE, rb.GZIP, rb.ZSTD])
def test_cleaning_keeps_the_latest_record_per_key_without_renumbering(tmp_path, compression):
    log = Log.create(tmp_path / "t-0", CONFIG)
    fill(log, 30, 10, compression=compression)
    log.roll()
    before = latest_by_key(log)
    size_before = log.size
    result = run_cleaning(log, task_for(log))
    assert result.end_offset == log.active_segment.base_offset == 300
    after = latest_by_key(log)
    assert after == before  # every key's latest value, at its original offset
    records = read_all(log)
    assert [o for o, _ in records] == sorted(o for o, _ in after.values())  # strictly increasing, with gaps
    assert len(records) == 10 and log.size < size_before / 5
    assert log.log_end_offset == 300
    # headers, timestamps and the codec survive a rebuild
    data = log.read(0, 1 << 20).records
    pos, header = next(rb.iter_batches(data))
    assert header.compression == compression
    rec = rb.decode_records(data, pos, header)[0]
    assert rec.headers[0].key == "h" and rec.timestamp == 1_000_000 + (rec.offset - header.base_offset)
    # the log still takes appends, and a reload (indexes, recovery) sees the same records
    log.append_as_leader(keyed_batch([(b"k0", b"new")]), leader_epoch=0)
    log.close()
    again = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=False, recovery_point=0)
    assert latest_by_key(again)[b"k0"] == (300, b"new")
    assert read_all(again)[:-1] == records


def test_small_cleaned_segments_are_grouped_and_read_across_gaps(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    fill(log, 40, 5)
    log.roll()
    assert len(log.segments) > 4
    first_dirty = run_cleaning(log, task_for(log)).end_offset
    assert len(log.segments) > 4  # grouped by the sizes before cleaning, as Kafka's groupSegmentsBySize
    fill(log, 1, 5)
    log.roll()
    run_cleaning(log, task_for(log, first_dirty))  # the next cleaning groups the small cleaned ones
    assert len(log.segments) == 2  # one cleaned segment + the active one
    for offset in range(0, 205, 7):  # any offset, in a gap or not, reads the next record kept
        info = log.read(offset, 1 << 20)
        kept = [o for o, _ in read_all(log) if o >= offset]
        assert info.next_offset > offset
        if kept:
            assert rb.read_header(info.records).last_offset >= kept[0]


def test_tombstones_stay_until_the_delete_horizon_then_go(tmp_path):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=200, cleanup_policy=("compact",), delete_retention_ms=0)
    log = Log.create(tmp_path / "t-0", config)
    fill(log, 5, 10, tombstone_every=2)
    log.roll()
    run_cleaning(log, task_for(log))
    latest = latest_by_key(log)
    assert latest[b"k0"][1] is None and latest[b"k1"][1] == b"v1-4"  # first cleaning: tombstones stay
    first_dirty = log.active_segment.base_offset
    # the clean section's last segment ages past delete.retention.ms: its tombstones may go
    old = time.time() - 3600
    for segment in log.segments[:-1]:
        os.utime(segment.log_path, (old, old))
    fill(log, 1, 1)  # some dirty data (k0 again is a live value now)
    log.roll()
    run_cleaning(log, task_for(log, first_dirty))
    latest = latest_by_key(log)
    assert latest[b"k0"][1] == b"v0-0"
    assert b"k2" not in latest and latest[b"k3"][1] == b"v3-4"  # tombstone of k2 gone with its key


def test_tombstones_are_kept_within_delete_retention(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)  # delete.retention.ms: a day
    fill(log, 3, 4, tombstone_every=2)
    log.roll()
    first = log.active_segment.base_offset
    run_cleaning(log, task_for(log))
    fill(log, 1, 1)
    log.roll()
    run_cleaning(log, task_for(log, first))
    assert latest_by_key(log)[b"k2"][1] is None


def test_the_last_batch_of_an_idempotent_producer_stays_empty(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    log.append_as_leader(
        keyed_batch([(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=0, base_sequence=0), leader_epoch=0
    )
    log.append_as_leader(keyed_batch([(b"a", b"2"), (b"b", b"2")]), leader_epoch=0)
    log.roll()
    run_cleaning(log, task_for(log, producers={7: 1}))
    batches = list(rb.iter_batches(log.read(0, 1 << 20).records))
    empty = batches[0][1]
    assert (empty.producer_id, empty.base_offset, empty.last_offset, empty.records_count) == (7, 0, 1, 0)
    assert empty.last_sequence == 1
    # producer state rebuilt from the log after a crash still knows the producer's sequence
    log.close()
    again = load_log(tmp_path / "t-0", CONFIG, clean_shutdown=False, recovery_point=0)
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    assert again.producer_state.producers[7].last_seq == 1


def test_keyless_records_are_dropped_by_the_cleaner(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    # written before the topic became compacted (the append skips the client checks, as then)
    log.append_as_leader(keyed_batch([(None, b"x"), (b"a", b"1")]), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.roll()
    run_cleaning(log, task_for(log))
    assert [v for _, v in read_all(log)] == [b"1"]


def test_a_small_offset_map_cleans_in_rounds(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    for r in range(20):  # 105 distinct keys, each written twice
        log.append_as_leader(keyed_batch([(b"k%d" % (r * 5 + i), b"%d" % r) for i in range(10)]), leader_epoch=0)
    log.roll()
    before = latest_by_key(log)
    first_dirty, rounds = 0, 0
    while first_dirty < log.active_segment.base_offset:
        result = run_cleaning(log, task_for(log, first_dirty, capacity=25))
        assert result.stats.map_entries <= 25
        assert result.end_offset > first_dirty
        first_dirty, rounds = result.end_offset, rounds + 1
    assert rounds > 3 and latest_by_key(log) == before
    fresh = Log.create(tmp_path / "t-1", CONFIG)
    fill(fresh, 2, 10)
    fresh.roll()
    with pytest.raises(OverflowError, match="dedupe.buffer.size"):
        clean(task_for(fresh, 0, capacity=5))  # one batch holds 10 keys
    assert not list((tmp_path / "t-1").glob("*.cleaned"))


def test_offset_map_capacity_follows_kafka():
    assert capacity_for(128 * 1024 * 1024, 1) == 5033164  # Kafka's default buffer
    assert capacity_for(24 * 100, 2) == 45
    m = OffsetMap(2)
    m.put(b"a" * 40, 5)
    m.put(b"a" * 40, 6)
    m.put(b"b", 7)
    assert (m.get(b"a" * 40), m.get(b"b"), m.get(b"c"), len(m)) == (6, 7, -1, 2)
    with pytest.raises(OverflowError):
        m.put(b"c", 8)


def test_groups_respect_segment_bytes(tmp_path):
    segments = [SegmentInfo(i * 10, 600) for i in range(7)]
    groups = group_segments(tmp_path, segments, LogConfig(segment_bytes=2000))
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10, 20], [30, 40, 50], [60]]


def test_a_swap_refuses_segments_the_log_no_longer_has(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    fill(log, 20, 10)
    log.roll()
    result = clean(task_for(log))
    log.truncate_to(0)
    with pytest.raises(ValueError, match="not inactive segments"):
        log.replace_segments(result.groups[0][0], list(result.groups[0][1]))


def test_a_compacted_log_refuses_keyless_records_with_record_errors(tmp_path):
    from protocol.record_validation import InvalidRecord

    log = Log.create(tmp_path / "t-0", CONFIG)
    with pytest.raises(InvalidRecord, match="Compacted topic cannot accept message without key") as refused:
        log.append_as_leader(keyed_batch([(b"a", b"1"), (None, b"2"), (b"c", b"3"), (None, b"4")]), leader_epoch=0)
    assert [i for i, _ in refused.value.record_errors] == [1, 3]
    assert log.log_end_offset == 0  # nothing of the batch was appended
    log.append_as_leader(keyed_batch([(b"a", b"1")], compression=rb.LZ4), leader_epoch=0)
    assert log.log_end_offset == 1
    plain = Log.create(tmp_path / "u-0", LogConfig())
    plain.append_as_leader(keyed_batch([(None, b"2")]), leader_epoch=0)  # a delete-only log takes them


def test_cleanable_offsets_stop_at_the_hw_the_active_segment_and_min_compaction_lag(tmp_path):
    from storage.cleaner.manager import cleanable_offsets, log_to_clean

    log = Log.create(tmp_path / "t-0", CONFIG)
    for r in range(30):  # record timestamps: 1_000_000 + 10_000 * r
        log.append_as_leader(
            keyed_batch([(b"k%d" % k, b"v%d" % r) for k in range(10)], ts=1_000_000 + 10_000 * r), leader_epoch=0
        )
    bases = [s.base_offset for s in log.segments]
    leo, now = log.log_end_offset, 1_000_000 + 10_000 * 30
    assert cleanable_offsets(log, None, leo, now) == (0, bases[-1], False)  # the active segment
    hw = bases[2] + 1  # inside the third segment: only the first two are wholly below it
    assert cleanable_offsets(log, None, hw, now)[1] == bases[2]
    # min.compaction.lag.ms: the first segment holding a record younger than the lag stops it
    lagged = Log(
        log.dir,
        replace_config(min_compaction_lag_ms=10_000 * 25),
        log.segments,
        log_start_offset=0,
        recovery_point=0,
        epoch_cache=log.epoch_cache,
    )
    first_young = next(s.base_offset for s in log.segments if s.largest_timestamp() > now - 10_000 * 25)
    assert cleanable_offsets(lagged, None, leo, now)[1] == first_young
    # a checkpoint beyond LEO or below the log start falls back to the log start offset
    assert cleanable_offsets(log, leo + 5, leo, now)[0] == 0
    assert len(bases) == 4
    ltc = log_to_clean(("t", 0), log, bases[2], leo, now)
    assert ltc.clean_bytes == sum(s.size for s in log.segments[:2])
    assert ltc.cleanable_bytes == log.segments[2].size
    assert 0 < ltc.dirty_ratio < 0.5 and not ltc.cleanable
    assert log_to_clean(("t", 0), log, bases[1], leo, now).cleanable  # 2 of 3 segments dirty
    # max.compaction.lag.ms: an old enough dirty segment must be cleaned whatever its ratio
    forced = Log(
        log.dir,
        replace_config(max_compaction_lag_ms=1000, min_cleanable_dirty_ratio=1.0),
        log.segments,
        log_start_offset=0,
        recovery_point=0,
        epoch_cache=log.epoch_cache,
    )
    forced_ltc = log_to_clean(("t", 0), forced, bases[2], leo, now)
    assert forced_ltc.needs_compaction_now and forced_ltc.cleanable


def replace_config(**changes):
    from dataclasses import replace

    return replace(CONFIG, **changes)


def test_compact_delete_also_applies_retention_and_compact_alone_does_not(tmp_path):
    both = replace_config(cleanup_policy=("compact", "delete"), retention_ms=1000)
    only = replace_config(retention_ms=1000)
    for config, expect_deleted in ((both, True), (only, False)):
        log = Log.create(tmp_path / f"{config.cleanup_policy[-1]}-0", config)
        for _ in range(20):
            log.append_as_leader(keyed_batch([(b"k%d" % k, b"v") for k in range(10)], ts=1_000_000), leader_epoch=0)
        log.roll()
        now = 1_000_000 + 5000  # every record is older than retention.ms
        assert bool(delete_old_segments(log, log.log_end_offset, now_ms=now)) == expect_deleted


def test_the_throttle_holds_a_cleaning_to_its_rate(tmp_path):
    log = Log.create(tmp_path / "t-0", CONFIG)
    fill(log, 40, 10)
    log.roll()
    task = task_for(log)
    total = sum(s.size for s in task.segments)
    rate = total * 4  # bytes/s: the map pass and the rewrite read everything once each, ~0.5 s
    from dataclasses import replace as dc_replace

    started = time.monotonic()
    clean(dc_replace(task, io_bytes_per_second=rate))
    assert time.monotonic() - started >= 2 * total / rate * 0.9


def test_aborted_transactions_neither_shadow_keys_nor_survive(tmp_path):
    from protocol.control_records import marker_batch

    def txn(pid, records):
        return rb.build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)

    log = Log.create(tmp_path / "t-0", CONFIG)
    log.append_as_leader(keyed_batch([(b"a", b"committed-a"), (b"b", b"committed-b")]), leader_epoch=0)
    log.append_as_leader(txn(9, [(b"a", b"aborted-a"), (b"c", b"aborted-c")]), leader_epoch=0)
    log.append_as_leader(marker_batch(9, 0, 0, commit=False), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(txn(8, [(b"b", b"txn-b")]), leader_epoch=0)
    log.append_as_leader(marker_batch(8, 0, 0, commit=True), leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    log.roll()
    run_cleaning(log, task_for(log))
    data = [info.records for info in [log.read(0, 1 << 30)]][0]
    values = [r.value for pos, h in rb.iter_batches(data) if not h.is_control for r in rb.decode_records(data, pos, h)]
    # the aborted write of "a" did not make the cleaner drop the committed one, and is gone itself
    assert values == [b"committed-a", b"txn-b"]
    assert [h.is_control for s in log.segments for _, h in s.headers()].count(True) == 2  # markers stay
