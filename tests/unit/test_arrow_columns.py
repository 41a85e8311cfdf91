"""The compiled Arrow column builder (`minikafka_native.ColumnBuilder`) agrees with its Python
reference on any batches and offset windows (property test), pyarrow reads its buffers as the
records they hold, and a damaged payload is refused by both without changing what they hold."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import record_batch as rb
from protocol.arrow_columns import ColumnBuilder
from protocol.errors import CorruptRecordBatch
from protocol.record_filter import batch_payload

pytest.importorskip("minikafka_native", reason="built by make setup")
pa = pytest.importorskip("pyarrow")

header_lists = st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))), max_size=3)
record = st.tuples(
    st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=30)), header_lists
)
batches = st.lists(st.lists(record, min_size=1, max_size=20), min_size=1, max_size=5)


def _batches(recs_per_batch, ts=1_700_000_000_000):
    out, offset = [], 0
    for i, recs in enumerate(recs_per_batch):
        rows = [(k, v, h, ts + 5 * j - 3 * i) for j, (k, v, h) in enumerate(recs)]
        batch = rb.build_batch(rows, base_offset=offset)
        header = rb.read_header(batch)
        out.append((batch_payload(batch, 0, header), header))
        offset += len(recs) + 2  # gaps between batches, as after compaction
    return out


def _fill(builder, payloads, lo, hi):
    return [builder.add(p, h.base_offset, h.base_timestamp, h.records_count, lo, hi) for p, h in payloads]


@given(batches, st.integers(0, 40), st.integers(0, 40), st.booleans())
@settings(max_examples=150, deadline=None)
def test_the_compiled_builder_matches_the_reference(recs, lo, width, headers):
    payloads = _batches(recs)
    compiled, reference = ColumnBuilder(headers), ColumnBuilder(headers, reference=True)
    assert _fill(compiled, payloads, lo, lo + width) == _fill(reference, payloads, lo, lo + width)
    assert len(compiled) == len(reference) and compiled.data_bytes() == reference.data_bytes()
    assert compiled.finish() == reference.finish()
    assert compiled.finish() == reference.finish()  # both start over


def _arrays(cols):
    n = cols["rows"]

    def binary(kind, column, length):
        bitmap, offsets, data, nulls = column
        bufs = [pa.py_buffer(bitmap) if bitmap else None, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, length, bufs, null_count=nulls)

    offsets = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols["offset"])])
    stamps = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols["timestamp"])])
    return (
        offsets.to_pylist(),
        stamps.to_pylist(),
        binary(pa.binary(), cols["key"], n),
        binary(pa.binary(), cols["value"], n),
    )


@pytest.mark.parametrize("codec", [rb.NONE, rb.LZ4])
def test_arrow_reads_the_buffers_as_the_records(codec):
    rows = [(b"k1", b"v1", [("a", b"x")], 1000), (None, b"", [], 1005), (b"", None, [("b", None)], 998)]
    batch = rb.build_batch(rows, base_offset=40, compression=codec)
    header = rb.read_header(batch)
    payload = batch_payload(batch, 0, header)
    builder = ColumnBuilder(headers=True)
    assert builder.add(payload, 40, header.base_timestamp, 3, 0, 1 << 62) == (3, 40, 42)
    assert builder.add(payload, 40, header.base_timestamp, 3, 41, 42) == (1, 41, 41)
    cols = builder.finish()
    offsets, stamps, keys, values = _arrays(cols)
    assert offsets == [40, 41, 42, 41]
    assert stamps == [1_000_000, 1_005_000, 998_000, 1_005_000]
    assert keys.to_pylist() == [b"k1", None, b"", None] and values.to_pylist() == [b"v1", b"", None, b""]
    ends, hkeys, hvalues = cols["headers"]
    total = len(hkeys[1]) // 4 - 1
    kind = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    key_col = pa.Array.from_buffers(pa.string(), total, [None, pa.py_buffer(hkeys[1]), pa.py_buffer(hkeys[2])])
    bitmap, voffsets, vdata, nulls = hvalues
    value_col = pa.Array.from_buffers(
        pa.binary(), total, [pa.py_buffer(bitmap), pa.py_buffer(voffsets), pa.py_buffer(vdata)], null_count=nulls
    )
    struct = pa.StructArray.from_arrays([key_col, value_col], names=["key", "value"])
    lists = pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), 5, [None, pa.py_buffer(ends)]), struct)
    assert lists.cast(kind).to_pylist() == [
        [{"key": "a", "value": b"x"}],
        [],
        [{"key": "b", "value": None}],
        [],
    ]


@pytest.mark.parametrize("reference", [False, True])
def test_a_damaged_payload_is_refused_and_leaves_the_builder_as_it_was(reference):
    good, bad_count, damaged = _batches([[(b"k", b"v", [])] * 3, [(b"k", b"v", [("h", b"1")])] * 2, [(b"k", b"v", [])]])
    builder = ColumnBuilder(True, reference=reference)
    builder.add(good[0], good[1].base_offset, good[1].base_timestamp, 3, 0, 100)
    before = builder.data_bytes()
    with pytest.raises(CorruptRecordBatch, match="records"):
        builder.add(bad_count[0], bad_count[1].base_offset, 0, 1, 0, 100)  # holds 2, header says 1
    with pytest.raises(CorruptRecordBatch):
        builder.add(damaged[0][:-1], damaged[1].base_offset, 0, 1, 0, 100)  # truncated
    assert len(builder) == 3 and builder.data_bytes() == before
    assert builder.finish()["rows"] == 3
