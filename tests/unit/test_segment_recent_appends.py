"""Reads at the tail find their batch through the segment's remembered appends
(`LogSegment._recent_position`) instead of an index scan; what they return must be exactly what a
reopened segment (nothing remembered, offset index and header scans only) returns, for every
offset and byte limit, through gaps, multi-batch appends, truncation and the forgetting of old
appends."""

import random

import pytest
from storage_helpers import batch

from storage import segment as segment_module
from storage.config import LogConfig
from storage.log import Log
from storage.log_loader import load_log


def _append_random(log: Log, rng: random.Random, appends: int) -> None:
    for i in range(appends):
        if rng.random() < 0.2:  # a follower's append: several batches, offsets with gaps
            start = log.log_end_offset + rng.choice((0, 0, 3))
            blobs, base = [], start
            for _ in range(rng.randint(2, 4)):
                n = rng.randint(1, 3)
                blobs.append(batch(n, base_offset=base, size=rng.randint(5, 300), tag=i, epoch=0))
                base += n + rng.choice((0, 0, 2))
            log.append_as_follower(b"".join(blobs))
        else:
            log.append_as_leader(batch(rng.randint(1, 4), size=rng.randint(5, 300), tag=i), leader_epoch=0)


def _reads(log: Log, limits: list[int]) -> list:
    out = []
    for offset in range(log.log_start_offset, log.log_end_offset + 1):
        for max_bytes in limits:
            for max_offset in (None, max(log.log_start_offset, log.log_end_offset - 2)):
                info = log.read(offset, max_bytes, max_offset)
                out.append((offset, max_bytes, max_offset, bytes(info.records), info.next_offset))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_tail_reads_match_a_segment_that_remembers_nothing(tmp_path, monkeypatch, seed):
    monkeypatch.setattr(segment_module, "RECENT_APPENDS", 8)  # forgetting happens within the test
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=6000, index_interval_bytes=rng.choice((100, 500, 4096)))
    log = Log.create(tmp_path / "t-0", config)
    _append_random(log, rng, 60)
    log.truncate_to(log.log_end_offset - rng.randint(1, 8))  # forgets, then appends again
    _append_random(log, rng, 20)
    assert log.active_segment._recent_pos, "the active segment remembers its appends"
    limits = [1, 200, 700, 10**6]
    remembered = _reads(log, limits)
    leo = log.log_end_offset
    log.close()
    reopened = load_log(tmp_path / "t-0", config, clean_shutdown=True, recovery_point=leo)
    assert not reopened.active_segment._recent_pos
    assert remembered == _reads(reopened, limits)
    reopened.close()
