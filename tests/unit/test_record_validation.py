"""Records a consumer could not read are refused, with Kafka's error and nothing appended (issue 15
part 2): every kind of damage inside an otherwise valid batch, in every codec, against a real log;
and the compiled validator (`minikafka_native`) agrees with its Python reference on valid,
damaged and random payloads."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_helpers import CODECS, DAMAGE, batch, good

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch, ErrorCode
from protocol.record_validation import InvalidRecord, validate_records_reference
from storage.config import LogConfig
from storage.log import Log

native = pytest.importorskip("minikafka_native", reason="built by make setup")


@pytest.fixture
def log(tmp_path):
    lg = Log.create(tmp_path / "t-0", LogConfig())
    lg.append_as_leader(batch([good(0)]), 0)
    yield lg
    lg.close()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(DAMAGE)), st.sampled_from(CODECS), st.integers(0, 4), st.integers(0, 4))
def test_each_kind_of_damage_is_refused_and_nothing_is_appended(tmp_path_factory, kind, codec, before, after):
    log = Log.create(tmp_path_factory.mktemp("log") / "t-0", LogConfig())
    try:
        log.append_as_leader(batch([good(0)]), 0)
        make, message = DAMAGE[kind]
        records = [good(i) for i in range(before)] + [make(before)] + [good(before + 1 + i) for i in range(after)]
        size, leo = log.size, log.log_end_offset
        with pytest.raises(InvalidRecord, match=message) as refused:
            log.append_as_leader(batch(records, codec), 0)
        assert refused.value.error_code == ErrorCode.INVALID_RECORD == 87
        assert [index for index, _ in refused.value.record_errors] == [before]
        assert (log.size, log.log_end_offset) == (size, leo)
        undamaged = [good(i) for i in range(before + 1 + after)]
        log.append_as_leader(batch(undamaged, codec), 0)  # the same batch, undamaged: taken
        assert log.log_end_offset == leo + before + 1 + after
    finally:
        log.close()


@pytest.mark.parametrize(
    "header,message",
    [
        ({"attributes": rb.CONTROL_BIT}, "not allowed to write control records"),
        ({"attributes": rb.TRANSACTIONAL_BIT}, "transactional batch needs a producer id"),
        ({"producer_id": 5, "producer_epoch": 0}, "invalid sequence number -1"),
    ],
)
def test_batch_level_rules(log, header, message):
    size = log.size
    with pytest.raises(InvalidRecord, match=message):
        log.append_as_leader(batch([good(0)], **header), 0)
    assert log.size == size


def test_a_record_count_that_disagrees_with_the_offsets_stays_corrupt_message(log):
    data = bytearray(batch([good(0), good(1)]))
    data[23:27] = (0).to_bytes(4, "big")  # last_offset_delta 0 with 2 records
    rb._U32.pack_into(data, 17, rb.compute_crc(data, 0, len(data)))
    with pytest.raises(CorruptRecordBatch) as refused:
        log.append_as_leader(bytes(data), 0)
    assert refused.value.error_code == ErrorCode.CORRUPT_MESSAGE


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=200),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3),
        ),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    st.integers(-2, 2),
)
def test_the_compiled_validator_agrees_with_the_reference(records, flips, count_delta):
    payload = bytearray(b"".join(rb.encode_record(i, i, k, val, h) for i, (k, val, h) in enumerate(records)))
    for pos, value in flips:
        payload[pos % len(payload)] = value
    count = len(records) + count_delta
    assert native.validate_records(bytes(payload), count) == validate_records_reference(bytes(payload), count)
    assert native.validate_records(memoryview(payload), count) == validate_records_reference(memoryview(payload), count)
    if not flips and not count_delta:
        assert validate_records_reference(bytes(payload), count) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(-1, 5))
def test_random_bytes_get_the_same_verdict_from_both(payload, count):
    assert native.validate_records(payload, count) == validate_records_reference(payload, count)


@pytest.mark.parametrize("kind", DAMAGE)
def test_each_damage_gets_the_same_verdict_from_both(kind):
    payload = good(0) + DAMAGE[kind][0](1) + good(2)
    assert native.validate_records(payload, 3) == validate_records_reference(payload, 3)
    assert native.validate_records(payload, 3)[0] == 1
