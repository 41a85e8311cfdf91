"""The aborted-transaction index of one segment (Kafka's `TransactionIndex`, `<base>.txnindex`).

One 34-byte entry per transaction whose ABORT marker lies in the segment, in marker order:
int16 version (0), int64 producer id, int64 first offset, int64 last offset (the marker's), int64
last stable offset (the LSO right after the abort: where a reader may stop looking). The file
exists only once it has an entry; entries are kept in memory too (aborts are rare).

A read_committed fetch asks every segment from the fetch offset on for the entries overlapping the
range it returns (`overlapping`); truncation drops entries whose marker is at or above the new end.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from storage.errors import StorageError

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class CorruptTransactionIndex(StorageError):
    pass


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path):
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        self.corrupt = False  # found unreadable on open: the loader rebuilds it
        if path.exists():
            try:
                self._load()
            except CorruptTransactionIndex:
                self.entries, self.corrupt = [], True

    def _load(self) -> None:
        data = self.path.read_bytes()
        if len(data) % ENTRY_SIZE:
            raise CorruptTransactionIndex(f"{self.path}: {len(data)} bytes is not a whole number of entries")
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != 0 or first > last:
                raise CorruptTransactionIndex(f"{self.path}: bad entry (version {version}, offsets {first}..{last})")
            self.entries.append(AbortedTxn(pid, first, last, lso))

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (its marker follows every earlier one's)."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted txn ending at {txn.last_offset} is out of order")
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(0, *txn))
        self.entries.append(txn)
        self._dirty = True

    def overlapping(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries of transactions that may hold records in [fetch_offset, upper_bound), and
        whether the search may stop here (an entry's LSO reached `upper_bound`)."""
        found, complete = [], False
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                complete = True
                break
        return found, complete

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above `offset`."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.reset(kept)

    def reset(self, entries: list[AbortedTxn] | None = None) -> None:
        """Replace every entry (recovery rebuilds the index from the log)."""
        self.entries = list(entries or [])
        if self.entries:
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_bytes(b"".join(_ENTRY.pack(0, *t) for t in self.entries))
            os.replace(tmp, self.path)
            self._dirty = True
        else:
            self.path.unlink(missing_ok=True)
            self._dirty = False

    def flush(self) -> None:
        if self._dirty and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def dup_fd(self) -> int | None:
        """A descriptor of the file for an fsync off the event loop, or None when clean."""
        if not self._dirty or not self.path.exists():
            return None
        self._dirty = False
        return os.open(self.path, os.O_RDONLY)
