"""The compiled record walk and offset map (`minikafka_native`) agree with their Python
references on any batch (property tests), and `rebuild_batch` keeps what Kafka's filterTo keeps."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch
from protocol.record_filter import batch_payload, rebuild_batch, record_columns, record_columns_reference
from storage.cleaner.offset_map import ReferenceOffsetMap

native = pytest.importorskip("minikafka_native", reason="built by make setup")

keys = st.one_of(st.none(), st.binary(max_size=40))
values = st.one_of(st.none(), st.binary(max_size=30))
records = st.lists(st.tuples(keys, values), min_size=1, max_size=30)


def payload_of(recs, ts=1000):
    batch = rb.build_batch([(k, v, [("h", b"x")], ts + i * 7) for i, (k, v) in enumerate(recs)])
    return batch, batch_payload(batch, 0, rb.read_header(batch))


@given(records)
@settings(max_examples=200, deadline=None)
def test_the_compiled_walk_matches_the_reference(recs):
    _, payload = payload_of(recs)
    compiled = record_columns(payload)
    reference = record_columns_reference(payload)
    assert tuple(map(list, compiled)) == tuple(map(list, reference))
    assert compiled.keys == [k for k, _ in recs] and compiled.null_values == [v is None for _, v in recs]


@given(st.lists(records, min_size=1, max_size=6), st.booleans(), st.integers(1, 60))
@settings(max_examples=200, deadline=None)
def test_the_compiled_offset_map_matches_the_reference(batches, retain_deletes, capacity):
    compiled, reference = native.OffsetMap(capacity), ReferenceOffsetMap(capacity)
    payloads, base = [], 0
    for recs in batches:
        _, payload = payload_of(recs)
        payloads.append((payload, base))
        outcomes = []
        for m in (compiled, reference):
            try:
                m.put_batch(payload, base)
                outcomes.append("ok")
            except OverflowError:
                outcomes.append("full")
        assert outcomes[0] == outcomes[1] and len(compiled) == len(reference)
        if outcomes[0] == "full":
            return
        base += len(recs) + 3  # gaps between batches, as in a cleaned log
    for payload, b in payloads:
        assert compiled.kept(payload, b, retain_deletes) == reference.kept(payload, b, retain_deletes)
    for recs in batches:
        for k, _ in recs:
            if k is not None:
                assert compiled.get(k) == reference.get(k)
    assert compiled.latest_offset == reference.latest_offset


def test_a_damaged_payload_is_refused_by_both():
    _, payload = payload_of([(b"k", b"v")])
    damaged = payload[:-3]
    with pytest.raises(CorruptRecordBatch):
        record_columns(damaged)
    with pytest.raises(CorruptRecordBatch):
        record_columns_reference(damaged)
    with pytest.raises(ValueError):
        native.OffsetMap(5).put_batch(damaged, 0)


@pytest.mark.parametrize("codec", [rb.NONE, rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD])
def test_rebuild_keeps_offsets_producer_fields_and_recomputes_max_timestamp(codec):
    recs = [(b"a", b"1"), (b"b", b"2"), (b"c", None), (b"d", b"4")]
    batch = rb.build_batch(
        [(k, v, [("h", b"%d" % i)], 1000 + 10 * i) for i, (k, v) in enumerate(recs)],
        base_offset=50,
        compression=codec,
        producer_id=9,
        producer_epoch=2,
        base_sequence=40,
        partition_leader_epoch=3,
    )
    header = rb.read_header(batch)
    payload = batch_payload(batch, 0, header)
    out = rebuild_batch(header, payload, record_columns(payload), [0, 2])
    new = rb.read_header(out)
    rb.validate_batch(out, 0, new)
    assert (new.base_offset, new.last_offset, new.records_count) == (50, 53, 2)
    assert (new.producer_id, new.producer_epoch, new.base_sequence, new.partition_leader_epoch) == (9, 2, 40, 3)
    assert new.compression == codec and new.max_timestamp == 1020 and new.base_timestamp == 1000
    got = rb.decode_records(out, 0, new)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers[0].value) for r in got] == [
        (50, b"a", b"1", 1000, b"0"),
        (52, b"c", None, 1020, b"2"),
    ]
    empty = rebuild_batch(header, payload, record_columns(payload), [])
    eh = rb.read_header(empty)
    assert (eh.records_count, eh.last_offset, eh.last_sequence) == (0, 53, 43) and rb.decode_records(empty, 0, eh) == []
