"""kill -9 at each step of a cleaning (issue 17): the restarted log dir recovers a consistent log
that serves the latest value of every key, with its high watermarks, leader epoch cache and
producer state intact, and no cleaner leftovers (Kafka's `.cleaned` / `.swap` / `.deleted` rules)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from crash_cleaner import CONFIG
from storage_helpers import keyed_batch, latest_by_key

from storage.cleaner.cleaner import CleanTask, SegmentInfo, clean
from storage.log_manager import LogManager
from storage.segment import unlink_all

pytestmark = pytest.mark.slow  # subprocesses
HELPER = Path(__file__).parents[1] / "helpers" / "crash_cleaner.py"
TP = ("crash", 0)


def prepare(root: Path):
    """A compacted log with an idempotent producer and three leader epochs, shut down cleanly
    with a high watermark checkpoint; returns what must survive."""
    lm = LogManager([root], CONFIG)
    lm.startup()
    lg = lm.get_or_create_log(TP)
    for r in range(60):
        records = [
            (b"k%d" % k, (None if r == 59 and k % 5 == 0 else b"v%d-%d" % (k, r) + b"x" * 50)) for k in range(30)
        ]
        producer = {"producer_id": 7, "producer_epoch": 0, "base_sequence": (r // 2) * 30} if r % 2 else {}
        if not producer:
            lg.append_as_leader(keyed_batch(records), leader_epoch=r // 20)
        else:
            lg.append_as_leader(keyed_batch(records, **producer), leader_epoch=r // 20)
    lg.roll()
    lm.write_high_watermarks({TP: lg.log_end_offset})
    expected = {
        "latest": latest_by_key(lg),
        "epochs": list(lg.epoch_cache.entries),
        "last_seq": lg.producer_state.producers[7].last_seq,
        "leo": lg.log_end_offset,
    }
    lm.shutdown()
    return expected


def reopen_and_check(root: Path, expected):
    lm = LogManager([root], CONFIG)
    lm.startup()
    lg = lm.get_log(TP)
    assert latest_by_key(lg) == expected["latest"]
    assert lm.loaded_high_watermarks[TP] == expected["leo"] == lg.log_end_offset
    assert list(lg.epoch_cache.entries) == expected["epochs"]
    assert lg.producer_state.producers[7].last_seq == expected["last_seq"]
    leftovers = [p.name for p in lg.dir.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    # and it cleans again from scratch to the same latest values
    task = CleanTask(
        str(lg.dir),
        lg.config,
        tuple(SegmentInfo(s.base_offset, s.size) for s in lg.segments[:-1]),
        0,
        lg.active_segment.base_offset,
        100_000,
    )
    for base, replaced in clean(task).groups:
        unlink_all(lg.replace_segments(base, list(replaced)))
    assert latest_by_key(lg) == expected["latest"]
    lm.shutdown()


@pytest.mark.parametrize("step", ["cleaned", "swap", "deleted", "done"])
def test_kill_9_at_each_step_of_a_cleaning(tmp_path, step):
    expected = prepare(tmp_path)
    child = subprocess.run(
        [sys.executable, str(HELPER), str(tmp_path), step], capture_output=True, text=True, timeout=60
    )
    assert child.returncode == -9 and f"step {step}" in child.stdout, child.stdout + child.stderr
    files = {p.suffix for p in (tmp_path / "crash-0").iterdir()}
    if step == "cleaned":
        assert ".cleaned" in files
    if step in ("swap", "deleted"):
        assert ".swap" in files
    reopen_and_check(tmp_path, expected)


def test_kill_9_while_the_cleaned_segment_is_being_written(tmp_path):
    expected = prepare(tmp_path)
    child = subprocess.Popen(
        [sys.executable, str(HELPER), str(tmp_path), "never", "20000"], stdout=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size > 0 for p in (tmp_path / "crash-0").glob("*.log.cleaned")):
            assert time.monotonic() < deadline and child.poll() is None, "the cleaning never started writing"
            time.sleep(0.01)
        child.kill()
        child.wait(10)
    finally:
        child.kill()
    time.sleep(0.5)  # the orphaned worker notices its broker is gone and exits
    sizes = [p.stat().st_size for p in (tmp_path / "crash-0").glob("*.log.cleaned")]
    time.sleep(0.5)
    assert sizes == [p.stat().st_size for p in (tmp_path / "crash-0").glob("*.log.cleaned")]  # nobody writes
    reopen_and_check(tmp_path, expected)
