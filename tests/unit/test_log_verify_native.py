"""The compiled check of a segment read (`minikafka_native.batches_valid`, native/src/verify.rs)
against its Python reference (`Log.verify_reference`): on every read, valid or damaged, the
compiled check accepts exactly what the reference accepts. A refused read then goes through the
reference, so its error stays the reference's."""

from pathlib import Path
from types import SimpleNamespace

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import record_batch as rb
from storage.errors import KafkaStorageError
from storage.log import Log

native = pytest.importorskip("minikafka_native")


def _read(counts: list[int], first: int, gaps: list[int]) -> tuple[bytes, list[int]]:
    """Batches of `counts` records each, the first at offset `first`, each next one `gap` offsets
    after the previous one's end (a compacted segment has gaps) -> (bytes, base offsets)."""
    parts, bases, base = [], [], first
    for count, gap in zip(counts, gaps, strict=True):
        data = bytearray(rb.build_batch([(b"k%d" % i, b"v" * (i % 7)) for i in range(count)]))
        rb.stamp_batch(data, 0, base, 3)
        parts.append(bytes(data))
        bases.append(base)
        base += count + gap
    return b"".join(parts), bases


def _reference_accepts(data: bytes, fetch_offset: int, segment_base: int, next_base: int | None) -> bool:
    segment = SimpleNamespace(base_offset=segment_base, log_path=Path("/data/t-0/00000000000000000000.log"))
    try:
        Log.verify_reference(segment, 0, data, fetch_offset, next_base)
    except KafkaStorageError:  # UnsupportedMagic (not v2) is one too: a CorruptRecordBatch
        return False
    return True


@st.composite
def reads(draw):
    n = draw(st.integers(0, 5))
    counts = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    gaps = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    first = draw(st.integers(0, 50))
    data, bases = _read(counts, first, gaps)
    damage = draw(st.sampled_from(["none", "flip", "truncate", "base", "length", "magic", "delta"]))
    buf = bytearray(data)
    if damage != "none" and buf:
        at = draw(st.sampled_from(range(len(bases))))
        start = sum(len(rb.build_batch([(b"k%d" % i, b"v" * (i % 7)) for i in range(c)])) for c in counts[:at])
        if damage == "flip":
            buf[draw(st.integers(0, len(buf) - 1))] ^= draw(st.integers(1, 255))
        elif damage == "truncate":
            del buf[draw(st.integers(0, len(buf) - 1)) :]
        elif damage == "base":
            rb._I64.pack_into(buf, start, draw(st.integers(-5, 80)))
        elif damage == "length":
            rb._I32.pack_into(buf, start + 8, draw(st.integers(-1, 200)))
        elif damage == "magic":
            buf[start + 16] = draw(st.sampled_from([0, 1, 3]))
        else:  # lastOffsetDelta, inside the CRC: the stored CRC is recomputed so that only the offsets are wrong
            rb._I32.pack_into(buf, start + 23, draw(st.integers(-2, 10)))
            size = rb._I32.unpack_from(buf, start + 8)[0] + rb.LOG_OVERHEAD
            rb._U32.pack_into(buf, start + 17, crc32c.crc32c(bytes(buf[start + rb.CRC_START : start + size])))
    fetch_offset = draw(st.integers(-1, 70))
    segment_base = draw(st.integers(0, 60))
    next_base = draw(st.one_of(st.none(), st.integers(0, 90)))
    return bytes(buf), fetch_offset, segment_base, next_base


@settings(max_examples=600, deadline=None)
@given(reads())
def test_the_compiled_check_accepts_exactly_what_the_reference_accepts(read):
    data, fetch_offset, segment_base, next_base = read
    assert native.batches_valid(data, fetch_offset, segment_base, next_base) == _reference_accepts(
        data, fetch_offset, segment_base, next_base
    )


def test_a_valid_read_is_accepted_and_each_kind_of_damage_refused():
    """Fixed cases, so that the property above is seen to hold on both answers."""
    data, bases = _read([3, 2, 4], 10, [0, 1, 0])
    assert native.batches_valid(data, 10, 0, None) and native.batches_valid(data, 12, 10, 20)
    assert native.batches_valid(memoryview(data), 10, 0)
    assert native.batches_valid(b"", 5, 0, None)  # nothing read
    flipped = bytearray(data)
    flipped[70] ^= 1
    refused = {
        "a record byte (CRC)": (bytes(flipped), 10, 0, None),
        "the first batch ends before the fetch offset": (data, 13, 0, None),
        "a batch before the segment's base": (data, 10, 11, None),
        "a batch at or past the next segment": (data, 10, 0, 19),
        "a torn last batch": (data[:-1], 10, 0, None),
        "not a v2 batch": (data[:16] + b"\x01" + data[17:], 10, 0, None),
    }
    for what, args in refused.items():
        assert not native.batches_valid(*args), what
        assert not _reference_accepts(*args), what


def test_the_crc_is_castagnoli_with_and_without_the_cpu_instruction():
    for size in (0, 1, 7, 8, 9, 61, 1000):
        data = bytes(range(256)) * 4
        assert native.crc32c(data[:size]) == native.crc32c_portable(data[:size]) == crc32c.crc32c(data[:size])
    assert native.crc32c(b"123456789") == 0xE3069283  # the standard check value of CRC-32C
