"""Combining a share-partition's state batches (Kafka's `StateBatchUtil.combineStateBatches`), pure.

`combine(current, written, start_offset)`: the batches written override the current ones where
they overlap (offset by offset); everything below `start_offset` goes (a batch across it is cut
there); the result is sorted by offset, without overlaps, and neighbours with the same state and
delivery count are one batch.
"""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.share.records import StateBatch


def _subtract(batch: StateBatch, covers: list[StateBatch]) -> list[StateBatch]:
    """The parts of `batch` no batch of `covers` (sorted, non-overlapping) covers."""
    pieces = []
    first = batch.first_offset
    for cover in covers:
        if cover.last_offset < first:
            continue
        if cover.first_offset > batch.last_offset:
            break
        if cover.first_offset > first:
            pieces.append(batch._replace(first_offset=first, last_offset=cover.first_offset - 1))
        first = max(first, cover.last_offset + 1)
        if first > batch.last_offset:
            return pieces
    pieces.append(batch._replace(first_offset=first))
    return pieces


def normalize(batches: Iterable[StateBatch], start_offset: int = -1) -> list[StateBatch]:
    """Sorted, cut at `start_offset`, later batches of `batches` winning where they overlap,
    neighbours with the same state and count merged."""
    kept: list[StateBatch] = []
    for batch in batches:
        kept = [piece for old in kept for piece in _subtract(old, [batch])]
        kept.append(batch)
    return _merge(kept, start_offset)


def combine(current: list[StateBatch], written: Iterable[StateBatch], start_offset: int) -> list[StateBatch]:
    new = normalize(written)
    rest = [piece for batch in current for piece in _subtract(batch, new)]
    return _merge(rest + new, start_offset)


def _merge(batches: list[StateBatch], start_offset: int) -> list[StateBatch]:
    out: list[StateBatch] = []
    for batch in sorted(batches):
        if batch.last_offset < start_offset:
            continue
        if batch.first_offset < start_offset:
            batch = batch._replace(first_offset=start_offset)
        if out:
            prev = out[-1]
            same = (prev.delivery_state, prev.delivery_count) == (batch.delivery_state, batch.delivery_count)
            if same and prev.last_offset + 1 == batch.first_offset:
                out[-1] = prev._replace(last_offset=batch.last_offset)
                continue
        out.append(batch)
    return out
