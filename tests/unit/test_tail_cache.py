"""The tail cache (`storage/tail_cache.py`): reads at the tail of the active segment come from
the last appends kept in memory, and must give exactly what the file read gives, for every
offset, byte limit and offset bound, through multi-batch appends, offset gaps, truncation, rolls
and appends too large to keep."""

import random

import pytest
from storage_helpers import batch

from storage.config import LogConfig
from storage.log import Log
from storage.segment import LogSegment
from storage.tail_cache import TailCache


def _append_random(log: Log, rng: random.Random, appends: int, large: bool = True) -> None:
    for i in range(appends):
        roll = rng.random()
        if roll < 0.2:  # a follower's append: several batches, offsets with gaps
            blobs, base = [], log.log_end_offset + rng.choice((0, 0, 3))
            for _ in range(rng.randint(2, 4)):
                n = rng.randint(1, 3)
                blobs.append(batch(n, base_offset=base, size=rng.randint(5, 300), tag=i, epoch=0))
                base += n + rng.choice((0, 0, 2))
            log.append_as_follower(b"".join(blobs))
        elif large and roll < 0.25:  # too large to keep: empties the cache
            log.append_as_leader(batch(2, size=9000, tag=i), leader_epoch=0)
        else:
            log.append_as_leader(batch(rng.randint(1, 4), size=rng.randint(5, 300), tag=i), leader_epoch=0)


def _reads(log: Log) -> list:
    out = []
    for offset in range(log.log_start_offset, log.log_end_offset + 1):
        for max_bytes in (0, 1, 150, 400, 700, 1500, 10**6):
            for max_offset in (None, log.log_end_offset - 1, log.log_end_offset - 3):
                info = log.read(offset, max_bytes, max_offset, min_one_batch=max_bytes != 150)
                out.append((offset, max_bytes, max_offset, bytes(info.records), info.next_offset))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_tail_reads_are_the_file_reads(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.choice((8000, 40000)), index_interval_bytes=rng.choice((100, 4096)))
    log = Log.create(tmp_path / "t-0", config)
    _append_random(log, rng, 80)
    log.truncate_to(log.log_end_offset - rng.randint(1, 8))  # what was kept past the cut must go
    _append_random(log, rng, 30, large=False)
    hits = []
    read_tail = LogSegment.read_tail

    def counted(self, *args):
        found = read_tail(self, *args)
        hits.append(found is not None)
        return found

    monkeypatch.setattr(LogSegment, "read_tail", counted)
    cached = _reads(log)
    assert sum(hits) >= 10, "reads at the tail come from memory"
    monkeypatch.setattr(LogSegment, "read_tail", lambda self, *args: None)
    assert cached == _reads(log)
    log.close()


def _batch_at(base: int, records: int, size: int) -> bytes:
    return batch(records, base_offset=base, size=size, epoch=0)


def test_the_oldest_appends_go_first_and_a_large_one_empties_it():
    cache = TailCache(max_bytes=1000, max_append_bytes=600)
    blobs = [_batch_at(i, 1, 200) for i in range(5)]
    for i, blob in enumerate(blobs):
        cache.add([blob], len(blob), i)
    assert cache.size <= 1000 and len(cache) == 1000 // len(blobs[0])
    assert cache.read(0, 10**6) is None  # forgotten
    assert cache.read(4, 10**6) == (blobs[4], 5)
    assert cache.read(3, 10**6) == (blobs[3] + blobs[4], 5)
    big = _batch_at(5, 1, 700)
    cache.add([big], len(big), 5)
    assert len(cache) == 0 and cache.read(4, 10**6) is None and cache.read(5, 10**6) is None


def test_an_append_is_kept_as_one_buffer_joined_from_its_parts():
    blob = _batch_at(7, 3, 100)
    cache = TailCache()
    cache.add([bytearray(blob[:61]), memoryview(blob)[61:]], len(blob), 9)
    assert cache.read(7, 10**6) == (blob, 10)
    assert cache.read(8, 10**6) == (blob, 10)  # one batch holds offset 8: it is returned whole
    assert cache.read(10, 10**6) is None
    assert cache.read(7, len(blob) - 1) is None  # over the limit: the file read decides
    assert cache.read(7, 10**6, max_offset=9) is None  # past the bound


def test_what_a_truncation_cut_is_never_served(tmp_path):
    log = Log.create(tmp_path / "t-0", LogConfig())
    for i in range(5):
        log.append_as_leader(batch(1, size=100, tag=i), leader_epoch=0)
    log.truncate_to(3)
    log.append_as_leader(batch(1, size=50, tag=9), leader_epoch=0)
    info = log.read(3, 10**6)
    assert (info.next_offset, len(info.records)) == (4, len(batch(1, size=50, tag=9)))
    assert log.read(2, 10**6).next_offset == 4
    log.close()
