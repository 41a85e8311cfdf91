"""The compiled encoding of Arrow columns into records (`minikafka_native.partition_rows`,
`encode_runs`) agrees with its Python reference on any columns, sliced ones included (property
test), chooses partitions as the producer's own partitioner does, and its payloads decode to the
rows they came from."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import arrow_encode as ae
from protocol import record_batch as rb
from protocol.partitioner import partition_for_key

pytest.importorskip("minikafka_native", reason="built by make setup")
pa = pytest.importorskip("pyarrow")

blobs = st.one_of(st.none(), st.binary(max_size=40))
rows = st.lists(st.tuples(blobs, blobs, st.one_of(st.none(), st.integers(0, 5))), min_size=1, max_size=60)


def _columns(data, start, explicit_partitions):
    keys = pa.array([k for k, _, _ in data], pa.binary()).slice(start)
    values = pa.array([v for _, v, _ in data], pa.binary()).slice(start)
    explicit = None
    if explicit_partitions:
        parts = pa.array([p for _, _, p in data], pa.int32()).slice(start)
        explicit = ae.int32_buffers(parts)
    return ae.column_buffers(keys), ae.column_buffers(values), explicit


@given(rows, st.integers(0, 5), st.booleans(), st.integers(1, 7), st.integers(0, 6), st.integers(1, 200))
@settings(max_examples=200, deadline=None)
def test_the_compiled_encoding_matches_the_reference(data, start, explicit_partitions, count, sticky, batch_size):
    start = min(start, len(data) - 1)
    keys, values, explicit = _columns(data, start, explicit_partitions)
    args = (keys, values, explicit, count, sticky, 3, batch_size)
    compiled = ae.partition_rows(*args)
    assert compiled == ae.reference_partition_rows(*args)
    for max_bytes in (1, 64, 1 << 20):
        runs = ae.encode_runs(keys, values, compiled[0], max_bytes)
        assert runs == ae.reference_encode_runs(keys, values, compiled[0], max_bytes)


def test_partitions_follow_the_producers_partitioner_and_payloads_decode_to_the_rows():
    data = [(b"k%d" % i if i % 3 else None, b"v%d" % i, 4 if i % 5 == 0 else None) for i in range(40)]
    keys, values, explicit = _columns(data, 0, True)
    parts, sticky, sent = ae.partition_rows(keys, values, explicit, 6, 2, 0, 4)
    chosen = list(pa.Array.from_buffers(pa.int32(), 40, [None, pa.py_buffer(parts)]).to_pylist())
    for (key, _, explicit_p), p in zip(data, chosen, strict=True):
        if explicit_p is not None:
            assert p == explicit_p
        elif key is not None:
            assert p == partition_for_key(key, 6)
    nulls = [p for (k, _, e), p in zip(data, chosen, strict=True) if k is None and e is None]
    assert nulls[:4] == [2, 2, 3, 3] and sticky == nulls[-1]  # moves on once 4 bytes went to one
    decoded: dict[int, list] = {}
    for partition, payload, count, size in ae.encode_runs(keys, values, parts, 50):
        header = rb.BatchHeader(0, 0, 0, 2, 0, 0, count - 1, 0, 0, -1, -1, -1, count)
        decoded.setdefault(partition, []).extend((r.key, r.value) for r in rb.decode_payload(payload, header))
        assert size == sum(len(k or b"") + len(v or b"") for k, v in decoded[partition][-count:])
    expected: dict[int, list] = {}
    for (key, value, _), p in zip(data, chosen, strict=True):
        expected.setdefault(p, []).append((key, value))
    assert decoded == expected  # every row once, in row order per partition


def test_columns_that_disagree_in_length_are_refused():
    keys = ae.column_buffers(pa.array([b"a"], pa.binary()))
    values = ae.column_buffers(pa.array([b"a", b"b"], pa.binary()))
    with pytest.raises(ValueError, match="length"):
        ae.encode_runs(keys, values, b"\0" * 8, 100)
