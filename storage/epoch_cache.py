"""The leader epoch cache of one partition replica (KIP-101), kept in `leader-epoch-checkpoint`.

Entries are (epoch, start offset): the first offset a leader wrote in that epoch. Invariants, as
Kafka's `LeaderEpochFileCache`: epochs and start offsets both strictly increase; assigning an epoch
removes any entry with an epoch >= it or a start offset >= its start offset; every change is
written to the checkpoint file before the call returns (when a path is given).

`end_offset_for(epoch, log_end_offset)` answers OffsetForLeaderEpoch: the start offset of the
first epoch above the requested one (or the LEO for the latest epoch), with the largest epoch
<= the requested one.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from storage import checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path | None = None, entries: list[tuple[int, int]] | None = None):
        self.path = path
        self.entries: list[tuple[int, int]] = list(entries or [])

    @classmethod
    def load(cls, path: Path) -> LeaderEpochCache:
        """Read the checkpoint; raises CorruptCheckpoint (the loader then rebuilds from the log)."""
        entries = checkpoint.read_epochs(path)
        for (e1, o1), (e2, o2) in zip(entries, entries[1:]):
            if not (e2 > e1 and o2 >= o1):
                raise checkpoint.CorruptCheckpoint(f"{path}: epochs must increase: {(e1, o1)} then {(e2, o2)}")
        return cls(path, entries)

    def _flush(self) -> None:
        if self.path is not None:
            checkpoint.write_epochs(self.path, self.entries)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which `offset` was written (UNDEFINED_EPOCH when unknown)."""
        i = bisect.bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether anything changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        if self.entries and self.entries[-1][0] == epoch and start_offset >= self.entries[-1][1]:
            return False
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        self._flush()
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (KIP-101, KIP-279)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self.latest_epoch:
            return epoch, log_end_offset
        higher = next(((e, o) for e, o in self.entries if e > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = [(e, o) for e, o in self.entries if e <= epoch]
        return (floor[-1][0] if floor else epoch), higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after `end_offset` (the log was truncated there)."""
        if self.entries and self.entries[-1][1] >= end_offset:
            self.entries = [(e, o) for e, o in self.entries if o < end_offset]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below the new log start offset; the last of them moves up to it."""
        below = [(e, o) for e, o in self.entries if o <= start_offset]
        if below:
            self.entries = [(below[-1][0], start_offset)] + [(e, o) for e, o in self.entries if o > start_offset]
            self._flush()

    def clear(self) -> None:
        self.entries = []
        self._flush()
