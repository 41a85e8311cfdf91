"""Rebuilding a log's producer state and aborted-transaction indexes from its segments (Kafka's
`ProducerStateManager` load plus `LogLoader.rebuildProducerState`).

Used when a log is opened and after it is truncated: the latest usable snapshot at or below the
point to rebuild from, then every batch header after it; a control batch's marker is decoded (one
small record) so open transactions close as they did when the marker was appended. Segments at or
above `rebuild_txn_index_from` (recovered after a crash, or with an unreadable `.txnindex`) get
their transaction index rebuilt from the markers on the way.
"""

from __future__ import annotations

import logging
from typing import Protocol

from protocol.control_records import read_marker
from protocol.errors import CorruptRecordBatch
from storage.producer_state import CorruptSnapshot, ProducerStateManager
from storage.segment import LogSegment
from storage.transaction_index import AbortedTxn


class RebuiltLog(Protocol):
    """What a rebuild reads of a log (`storage.log.Log`): its segments, offsets and the producer
    state it resets and refills."""

    @property
    def producer_state(self) -> ProducerStateManager: ...

    @property
    def segments(self) -> list[LogSegment]: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...


log = logging.getLogger(__name__)


def marker_of(segment, position: int, header):
    """The decoded marker of the control batch at `position`, or None (unknown type, unreadable)."""
    try:
        return read_marker(segment.pread(header.size, position), 0, header)
    except CorruptRecordBatch as e:
        log.warning("%s: %s", segment.log_path, e)
        return None


def rebuild_producer_state(lg: RebuiltLog, *, rebuild_txn_index_from: int | None = None) -> None:
    """Reload `lg.producer_state` up to the log end; snapshots above it are stale and deleted."""
    state = lg.producer_state
    state.delete_snapshots_from(lg.log_end_offset + 1)
    if rebuild_txn_index_from is not None:
        state.delete_snapshots_from(rebuild_txn_index_from + 1)
        for segment in lg.segments:
            if segment.base_offset >= rebuild_txn_index_from:
                segment.txn_index.reset()
    state.reset(lg.log_start_offset)
    start = lg.log_start_offset
    for offset, path in reversed(state.snapshots()):
        try:
            state.load_snapshot(path)
            start = offset
            break
        except CorruptSnapshot as e:
            log.warning("%s; rebuilding producer state from the log", e)
            path.unlink(missing_ok=True)
            state.reset(lg.log_start_offset)
    segments = lg.segments
    for segment, next_segment in zip(segments, segments[1:] + [None]):
        if next_segment is not None and next_segment.base_offset <= start:
            continue  # wholly below the snapshot
        if next_segment is None and start < segment.base_offset and rebuild_txn_index_from is not None:
            state.take_snapshot()  # as Kafka after a rebuild: the next load starts at the active segment
        rebuild = rebuild_txn_index_from is not None and segment.base_offset >= rebuild_txn_index_from
        for position, header in segment.headers(0):
            if header.next_offset <= start:
                continue
            marker = marker_of(segment, position, header) if header.is_control and header.producer_id >= 0 else None
            completed = state.update_from_header(header, marker)
            if completed is not None and completed.is_aborted and rebuild:
                segment.txn_index.append(
                    AbortedTxn(
                        completed.producer_id,
                        completed.first_offset,
                        completed.last_offset,
                        state.last_stable_offset_after(completed),
                    )
                )
