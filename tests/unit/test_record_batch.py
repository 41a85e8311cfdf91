"""RecordBatch v2: our batches against kafka-python's record classes (an independent codec), for
every compression codec, plus corruption and in-place rewriting."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch, UnsupportedCompression, UnsupportedMagic
from protocol.record_validation import validate_client_batch

CODECS = [rb.NONE, rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD]
RECORDS = [
    (b"k1", b"v1" * 50, [("h", b"x"), ("n", None)], 1700000000000),
    (None, b"v2", [], 1700000000005),
    (b"k3", None, [], 1700000000002),
]


def kafka_python_batch(codec, records=RECORDS, base_offset=0, producer_id=-1, base_sequence=-1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_validate_and_decode(codec):
    data = kafka_python_batch(codec, base_offset=500, producer_id=77, base_sequence=10)
    ((pos, header),) = list(rb.iter_batches(data))
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (500, 3, 2)
    assert (header.compression, header.producer_id, header.base_sequence) == (codec, 77, 10)
    assert header.max_timestamp == 1700000000005 and header.last_sequence == 12
    rb.validate_batch(data, pos, header)
    records = rb.decode_records(data, pos, header)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (500 + i, ts, k, v) for i, (k, v, _, ts) in enumerate(RECORDS)
    ]
    assert records[0].headers == (rb.Header("h", b"x"), rb.Header("n", None))


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_by_kafka_python(codec):
    data = rb.build_batch(RECORDS, base_offset=9, compression=codec, producer_id=3, producer_epoch=1, base_sequence=0)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc() and batch.compression_type == codec
    assert (batch.base_offset, batch.producer_id, batch.base_sequence, batch.records_count) == (9, 3, 0, 3)
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
    assert got == [(9 + i, ts, k, v, [tuple(h) for h in hs]) for i, (k, v, hs, ts) in enumerate(RECORDS)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=40),
            st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
        ),
        min_size=1,
        max_size=5,
    ),
    st.sampled_from(CODECS),
)
def test_build_decode_round_trip(records, codec):
    data = rb.build_batch(records, compression=codec, timestamp_ms=1000)
    header = rb.read_header(data)
    rb.validate_batch(data, 0, header)
    decoded = rb.decode_records(data, 0, header)
    assert [(r.key, r.value, [tuple(h) for h in r.headers]) for r in decoded] == [
        (k, v, [tuple(h) for h in hs]) for k, v, hs in records
    ]


def test_stamping_offsets_and_leader_epoch_keeps_the_crc_valid():
    data = bytearray(kafka_python_batch(rb.LZ4))
    header = rb.read_header(data)
    rb.stamp_batch(data, 0, base_offset=1234, partition_leader_epoch=7)
    stamped = rb.read_header(data)
    assert (stamped.base_offset, stamped.partition_leader_epoch, stamped.crc) == (1234, 7, header.crc)
    rb.validate_batch(data, 0, stamped)
    assert DefaultRecordBatch(bytes(data)).validate_crc()
    assert rb.decode_records(data)[2].offset == 1236


def test_log_append_time_rewrite_recomputes_the_crc():
    data = bytearray(rb.build_batch(RECORDS))
    rb.set_log_append_time(data, 0, 1800000000000)
    header = rb.read_header(data)
    assert header.is_log_append_time and header.max_timestamp == 1800000000000
    rb.validate_batch(data, 0, header)
    assert DefaultRecordBatch(bytes(data)).timestamp_type == 1


def test_crc_mismatch_is_corrupt():
    data = bytearray(rb.build_batch(RECORDS))
    data[-1] ^= 0xFF
    with pytest.raises(CorruptRecordBatch, match="CRC"):
        rb.validate_batch(data, 0, rb.read_header(data))


def _recrc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, rb.compute_crc(data, 0, len(data)))
    return data


def test_record_count_disagreeing_with_payload_is_corrupt():
    for count in (2, 4):
        data = bytearray(rb.build_batch(RECORDS))
        struct.pack_into(">i", data, 57, count)
        with pytest.raises(CorruptRecordBatch, match="records"):
            validate_client_batch(_recrc(data), 0, rb.read_header(data))


def test_garbage_records_are_corrupt_not_crashes():
    data = bytearray(rb.build_batch(RECORDS))
    data[rb.HEADER_SIZE :] = b"\xff" * (len(data) - rb.HEADER_SIZE)
    with pytest.raises(CorruptRecordBatch):
        validate_client_batch(_recrc(data), 0, rb.read_header(data))


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_old_and_unknown_message_formats_are_refused(magic):
    data = bytearray(rb.build_batch(RECORDS))
    data[16] = magic
    with pytest.raises(UnsupportedMagic) as err:
        list(rb.iter_batches(data))
    assert err.value.error_code == 43  # UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_unknown_codec_is_refused():
    data = bytearray(rb.build_batch(RECORDS))
    struct.pack_into(">h", data, 21, 6)
    with pytest.raises(UnsupportedCompression):
        rb.decode_records(_recrc(data))


def test_truncated_and_overrunning_batches():
    data = rb.build_batch(RECORDS) + rb.build_batch(RECORDS)
    assert len(list(rb.iter_batches(data))) == 2
    with pytest.raises(CorruptRecordBatch):
        list(rb.iter_batches(data[:-5]))
    # A fetch response cut at max_bytes may end in a partial batch, which readers skip.
    assert len(list(rb.iter_batches(data[:-5], allow_partial_tail=True))) == 1
    with pytest.raises(CorruptRecordBatch):
        rb.read_header(data[:10])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.lists(st.tuples(st.integers(0, 10**5), st.integers(0, 255)), max_size=3))
def test_random_and_mutated_batches_raise_only_corrupt_batch(noise, flips):
    for data in (bytearray(noise), bytearray(rb.build_batch(RECORDS[:2], compression=rb.GZIP))):
        for pos, value in flips if data else ():
            data[pos % len(data)] = value
        try:
            for pos, header in rb.iter_batches(data):
                rb.validate_batch(data, pos, header)
        except CorruptRecordBatch:
            pass


@pytest.mark.parametrize(
    "value,wire",
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_zigzag_varint_and_varlong_encodings(value, wire):
    assert rb.encode_varint(value) == wire
    assert rb.read_varint(wire, 0, len(wire)) == (value, len(wire))


def test_varint_longer_than_allowed_is_corrupt():
    with pytest.raises(CorruptRecordBatch):
        rb.read_varint(b"\xff" * 6, 0, 6, max_bytes=5)
    with pytest.raises(CorruptRecordBatch):
        rb.read_varint(b"\xff\xff", 0, 2)


def test_control_and_transactional_bits():
    # A commit marker as a transaction coordinator writes it: control record key = version 0, type 1.
    data = rb.build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05", [])],
        control=True,
        transactional=True,
        producer_id=9,
        producer_epoch=2,
    )
    header = rb.read_header(data)
    assert header.is_control and header.is_transactional and not header.is_log_append_time
    batch = DefaultRecordBatch(data)
    assert batch.is_control_batch and batch.is_transactional
    assert rb.decode_records(data)[0].key == b"\x00\x00\x00\x01"


# ---- what a leader checks of a client batch (protocol.record_validation) -------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=300), st.none() | st.binary(max_size=9000)), min_size=1, max_size=40
    ),
    st.sampled_from(CODECS),
)
def test_framing_check_accepts_every_well_formed_batch(records, codec):
    data = kafka_python_batch(codec, [(k, v, [], 1700000000000) for k, v in records])
    validate_client_batch(data, 0, rb.read_header(data))  # kafka-python built it: it must pass


@pytest.mark.parametrize("codec", CODECS)
def test_framing_check_counts_records_inside_compressed_payloads(codec):
    data = bytearray(kafka_python_batch(codec))
    struct.pack_into(">i", data, 23, 3)  # last_offset_delta 3 ...
    struct.pack_into(">i", data, 57, 4)  # ... and records_count 4: consistent, but 3 are there
    with pytest.raises(CorruptRecordBatch, match="holds 3"):
        validate_client_batch(_recrc(data), 0, rb.read_header(data))


@pytest.mark.parametrize("delta", [-1, +1])
def test_framing_check_refuses_a_record_length_off_by_one(delta):
    data = bytearray(rb.build_batch([(None, b"a" * 10), (None, b"b" * 10)]))
    data[rb.HEADER_SIZE] += 2 * delta  # zig-zag: the first record's length +-1
    with pytest.raises(CorruptRecordBatch):
        validate_client_batch(_recrc(data), 0, rb.read_header(data))


def test_framing_check_refuses_inconsistent_offset_range_and_count():
    # Kafka's LogValidator: "Inconsistent batch offset range and record count".
    data = bytearray(rb.build_batch(RECORDS))
    struct.pack_into(">i", data, 23, 5)
    with pytest.raises(CorruptRecordBatch, match="last_offset_delta"):
        validate_client_batch(_recrc(data), 0, rb.read_header(data))


def test_framing_check_refuses_zero_and_negative_record_lengths():
    for length_byte in (0x00, 0x01):  # zig-zag 0 and -1
        data = bytearray(rb.build_batch([(None, b"a")]))
        data[rb.HEADER_SIZE] = length_byte
        with pytest.raises(CorruptRecordBatch, match="record length"):
            validate_client_batch(_recrc(data), 0, rb.read_header(data))
