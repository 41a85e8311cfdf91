"""Kill a writing process with SIGKILL at random points; the log must always recover whole.

Each round starts the writer (which itself recovers the previous round's log), lets it run for a
random time, kills it, then opens the log here and checks: every batch's CRC is valid, offsets are
contiguous from 0, each record's value is its own offset, and nothing reported as flushed is missing.
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from crash_writer import CONFIG as WRITER_CONFIG
from storage_helpers import read_all

from protocol import record_batch as rb
from storage import checkpoint
from storage.log_loader import load_log

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

WRITER = Path(__file__).parents[1] / "helpers" / "crash_writer.py"


def test_sigkill_at_random_points_loses_nothing_flushed(tmp_path):
    seed = int(os.environ.get("CRASH_SEED", random.randrange(1 << 30)))
    print(f"crash test seed {seed} (CRASH_SEED={seed} reproduces the kill times)")
    rnd = random.Random(seed)
    flushed = 0
    for round_no in range(6):
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(tmp_path), str(round_no)], stdout=subprocess.PIPE, text=True
        )
        opened = proc.stdout.readline()
        assert opened.startswith("opened"), opened
        assert int(opened.split()[1]) >= flushed, "the writer's recovery lost flushed data"
        deadline = time.monotonic() + rnd.uniform(0.05, 0.6)
        last_line = None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("flushed"):
                last_line = line
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=10)
        lines = [last_line or ""] + rest.splitlines()
        reported = [int(line.split()[1]) for line in lines if line.startswith("flushed")]
        flushed = max([flushed] + reported)

        rp = checkpoint.read_offsets(tmp_path / checkpoint.RECOVERY_POINT_CHECKPOINT).get(("crash", 0), 0)
        log = load_log(tmp_path / "crash-0", WRITER_CONFIG, clean_shutdown=False, recovery_point=rp)
        try:
            records = read_all(log)  # reads verify every batch's CRC
            assert [o for o, _ in records] == list(range(log.log_end_offset))
            assert all(v.split(b".")[0] == b"%d" % o for o, v in records)
            assert log.log_end_offset >= flushed, f"round {round_no}: flushed {flushed}, recovered {log.log_end_offset}"
            for segment in log.segments:
                for pos, header in segment.headers(0):
                    rb.validate_batch(segment.pread(header.size, pos), 0, header)
        finally:
            log.close()
    assert flushed > 0
