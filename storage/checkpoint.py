"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

Formats (Kafka `CheckpointFile`, version 0):
- offset checkpoints (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
  `log-start-offset-checkpoint` in each log dir): entries `<topic> <partition> <offset>`;
- `leader-epoch-checkpoint` (in each partition dir): entries `<epoch> <start offset>`.

Writes are atomic: `<name>.tmp` is written and fsynced, renamed over the file, and the directory
fsynced. Reads raise `CorruptCheckpoint` naming the file and line on any deviation.
"""

from __future__ import annotations

import os
from pathlib import Path

from storage.errors import CorruptCheckpoint

VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_lines(path: Path, entries: list[str]) -> None:
    """Atomically replace `path` with the version line, count line and `entries`."""
    tmp = path.with_name(path.name + ".tmp")
    data = "".join(f"{line}\n" for line in [str(VERSION), str(len(entries)), *entries]).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_lines(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint, each split into `fields` words. A missing file is empty."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CorruptCheckpoint(f"{path}: not text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(VERSION):
        raise CorruptCheckpoint(f"{path}: line 1 must be version {VERSION}, got {lines[:1]!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CorruptCheckpoint(f"{path}: line 2 must be the entry count, got {lines[1]!r}") from None
    entries = [line.split() for line in lines[2:]]
    if count != len(entries):
        raise CorruptCheckpoint(f"{path}: count line says {count} entries, file has {len(entries)}")
    for i, words in enumerate(entries, start=3):
        if len(words) != fields:
            raise CorruptCheckpoint(f"{path}: line {i} must have {fields} fields: {' '.join(words)!r}")
    return entries


def _as_int(path: Path, word: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise CorruptCheckpoint(f"{path}: {word!r} is not an integer") from None


def write_offsets(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Write an offset checkpoint: {(topic, partition): offset}."""
    write_lines(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    return {(t, _as_int(path, p)): _as_int(path, o) for t, p, o in read_lines(path, 3)}


def write_epochs(path: Path, entries: list[tuple[int, int]]) -> None:
    """Write a leader-epoch checkpoint: [(epoch, start_offset)]."""
    write_lines(path, [f"{e} {o}" for e, o in entries])


def read_epochs(path: Path) -> list[tuple[int, int]]:
    return [(_as_int(path, e), _as_int(path, o)) for e, o in read_lines(path, 2)]
