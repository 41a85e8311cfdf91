"""A Log against a plain in-memory model (hypothesis stateful testing).

The model is a list of batches (base offset, values) plus the log start offset; the log's
segment layout is its own business, so the model only fixes what a reader can observe: LEO, log
start offset, every record from start to LEO, what a bounded read returns, and the epoch of every
stored batch.
"""

import dataclasses
import pathlib
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from storage_helpers import delete_old_segments, read_all, values

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.errors import InvalidAppendOffset, OffsetOutOfRange
from storage.log import Log
from storage.log_loader import load_log

CONFIG = LogConfig(segment_bytes=700, segment_ms=5000, index_interval_bytes=120, segment_index_bytes=48)


class LogMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self.tmp.name) / "topic-0"
        self.log = Log.create(self.dir, CONFIG)
        self.batches: list[tuple[int, list[bytes], int]] = []  # (base offset, values, epoch)
        self.start = 0
        self.epoch = 0
        self.ts = 1_000_000
        self.serial = 0

    def teardown(self):
        self.log.close()
        self.tmp.cleanup()

    @property
    def leo(self):
        return self.batches[-1][0] + len(self.batches[-1][1]) if self.batches else self.start

    def _values(self, n, size):
        self.serial += 1
        return [b"%d-%d-" % (self.serial, i) + b"v" * size for i in range(n)]

    @rule(n=st.integers(1, 4), size=st.integers(0, 120), new_epoch=st.booleans(), dt=st.integers(0, 3000))
    def append_as_leader(self, n, size, new_epoch, dt):
        self.epoch += new_epoch
        self.ts += dt
        vals = self._values(n, size)
        data = rb.build_batch([(None, v, [], self.ts) for v in vals], base_offset=12345)
        info = self.log.append_as_leader(data, leader_epoch=self.epoch)
        assert info.first_offset == self.leo
        self.batches.append((self.leo, vals, self.epoch))

    @rule(n=st.integers(1, 3), gap=st.sampled_from([-1, 0, 0, 0, 2]))
    def append_as_follower(self, n, gap):
        vals = self._values(n, 10)
        base = self.leo + gap
        data = rb.build_batch(
            [(None, v, [], self.ts) for v in vals], base_offset=base, partition_leader_epoch=self.epoch
        )
        if gap < 0:
            try:
                self.log.append_as_follower(data)
                raise AssertionError("a follower append below LEO was accepted")
            except InvalidAppendOffset:
                return
        self.log.append_as_follower(data)  # a gap (a compacted leader's) moves no log start offset
        self.batches.append((base, vals, self.epoch))

    @rule(data=st.data())
    def read(self, data):
        offset = data.draw(st.integers(self.start, self.leo))
        max_bytes = data.draw(st.integers(1, 2000))
        max_offset = data.draw(st.none() | st.integers(self.start, self.leo + 1))
        got = values(self.log.read(offset, max_bytes, max_offset).records)
        expected = [(b + i, v) for b, vals, _ in self.batches for i, v in enumerate(vals)]
        if offset < self.leo and (max_offset is None or offset < max_offset):
            first_batch = next((b for b, vals, _ in self.batches if b + len(vals) > offset), None)
            fits = max_offset is None or any(
                b == first_batch and b + len(vals) - 1 < max_offset for b, vals, _ in self.batches
            )
            assert bool(got) == fits, (offset, max_offset, got[:2])
        if got:
            start = expected.index(got[0])
            assert got == expected[start : start + len(got)]
            assert got[0][0] <= offset <= got[-1][0] or got[0][0] > offset
            if max_offset is not None:
                assert got[-1][0] < max_offset

    @rule(data=st.data())
    def read_out_of_range(self, data):
        offset = data.draw(st.sampled_from([self.leo + 1, self.start - 1]))
        if offset < 0:
            return
        try:
            self.log.read(offset, 100)
            raise AssertionError(f"read at {offset} outside [{self.start}, {self.leo}] succeeded")
        except OffsetOutOfRange:
            pass

    @rule(data=st.data())
    def truncate_to(self, data):
        target = data.draw(st.integers(0, self.leo + 2))
        self.log.truncate_to(target)
        if target >= self.leo:
            return
        if target < self.start:
            self.batches, self.start = [], target
            return
        self.batches = [b for b in self.batches if b[0] + len(b[1]) - 1 < target]

    @rule(offset=st.integers(0, 50))
    def truncate_fully(self, offset):
        offset += self.leo
        self.log.truncate_fully_and_start_at(offset)
        self.batches, self.start = [], offset

    @rule()
    def roll(self):
        self.log.roll()

    @rule(retention=st.integers(0, 1500), data=st.data())
    def retention(self, retention, data):
        hw = data.draw(st.integers(self.start, self.leo))
        self.log.config = dataclasses.replace(CONFIG, retention_bytes=retention)
        delete_old_segments(self.log, hw)
        self.log.config = CONFIG
        new_start = self.log.log_start_offset
        assert self.start <= new_start <= max(hw, self.start)
        self.start = new_start
        self.batches = [b for b in self.batches if b[0] >= new_start]

    @rule(clean=st.booleans(), torn_tail=st.binary(max_size=80), recovery_fraction=st.floats(0, 1))
    def reopen(self, clean, torn_tail, recovery_fraction):
        recovery_point = self.log.recovery_point
        self.log.close()
        if not clean and torn_tail:
            with open(self.log.active_segment.log_path, "ab") as f:
                f.write(torn_tail)
        rp = recovery_point if clean else int(recovery_point * recovery_fraction)
        self.log = load_log(self.dir, CONFIG, clean_shutdown=clean, recovery_point=rp, log_start_offset=self.start)

    @invariant()
    def agrees_with_model(self):
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.start
        assert read_all(self.log) == [(b + i, v) for b, vals, _ in self.batches for i, v in enumerate(vals)]
        for base, _, epoch in self.batches:
            assert self.log.epoch_cache.epoch_for_offset(base) == epoch
        assert self.log.recovery_point <= self.log.log_end_offset


TestLogAgainstModel = LogMachine.TestCase
TestLogAgainstModel.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None, suppress_health_check=list(HealthCheck)
)
