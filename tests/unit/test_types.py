"""Kafka primitive encodings, byte for byte (protocol guide, "Protocol Primitive Types")."""

import uuid

import pytest

from protocol.errors import FieldNotInVersion, MalformedMessage
from protocol.types import (
    Array,
    Boolean,
    BufferReader,
    CompactBytes,
    CompactNullableString,
    CompactRecords,
    CompactString,
    FieldDict,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    KStruct,
    NullableBytes,
    NullableString,
    String,
    UnsignedVarInt,
    Uuid,
)

U = uuid.UUID("0123456789abcdef0123456789abcdef")

ENCODINGS = [
    (Int8sb, -1, b"\xff"),
    (Int16sb, 258, b"\x01\x02"),
    (Int32sb, -2, b"\xff\xff\xff\xfe"),
    (Int64sb, 1, b"\x00" * 7 + b"\x01"),
    (Int32ub, 0xFFFFFFFF, b"\xff\xff\xff\xff"),
    (Boolean, True, b"\x01"),
    (UnsignedVarInt, 0, b"\x00"),
    (UnsignedVarInt, 300, b"\xac\x02"),
    (UnsignedVarInt, 2**31 - 1, b"\xff\xff\xff\xff\x07"),
    (String, "ab", b"\x00\x02ab"),
    (String, "", b"\x00\x00"),
    (NullableString, None, b"\xff\xff"),
    (CompactString, "ab", b"\x03ab"),
    (CompactNullableString, None, b"\x00"),
    (CompactNullableString, "é", b"\x03\xc3\xa9"),
    (NullableBytes, None, b"\xff\xff\xff\xff"),
    (NullableBytes, b"x", b"\x00\x00\x00\x01x"),
    (CompactBytes, b"xy", b"\x03xy"),
    (Uuid, U, U.bytes),
    (Array(Int16sb), [1, 2], b"\x00\x00\x00\x02\x00\x01\x00\x02"),
    (Array(Int16sb, nullable=True), None, b"\xff\xff\xff\xff"),
    (Array(Int16sb, compact=True), [7], b"\x02\x00\x07"),
    (Array(Int16sb, compact=True, nullable=True), None, b"\x00"),
]


@pytest.mark.parametrize("con,value,wire", ENCODINGS, ids=lambda x: repr(x)[:30])
def test_exact_encoding(con, value, wire):
    compiled = con.compile()
    assert compiled.build(value) == wire
    assert compiled.parse_stream(BufferReader(wire)) == value


@pytest.mark.parametrize(
    "con,wire",
    [
        (Int32sb, b"\x00\x01"),  # short read
        (String, b"\x00\x05ab"),  # length beyond the buffer
        (String, b"\xff\xff"),  # null in a non-nullable string
        (NullableString, b"\xff\xfe"),  # -2 is not a length
        (CompactString, b"\x00"),  # compact null in a non-nullable string
        (UnsignedVarInt, b"\xff\xff\xff\xff\xff\x01"),  # longer than 5 bytes
        (UnsignedVarInt, b"\x80"),  # truncated varint
        (Array(Int32sb), b"\x7f\xff\xff\xff"),  # count far beyond the bytes left: no allocation
        (Array(Int32sb), b"\xff\xff\xff\xff"),  # null in a non-nullable array
        (Uuid, b"\x00" * 15),
    ],
    ids=lambda x: repr(x)[:30],
)
def test_bad_input_raises_malformed(con, wire):
    with pytest.raises(MalformedMessage):
        con.compile().parse_stream(BufferReader(wire))


INNER = KStruct(("leader_id", Int32sb, -1), ("leader_epoch", Int32sb, -1), flexible=True)
FLEX = KStruct(
    ("name", CompactString, ""),
    ("records", CompactRecords, None),
    absent=(("old_field", 0, False), ("old_ignorable", 0, True)),
    tagged=((0, "cluster_id", CompactNullableString, None), (1, "current_leader", INNER, INNER)),
    flexible=True,
).compile()


def test_tagged_fields_written_only_when_not_default():
    assert FLEX.build({"name": "t"}) == b"\x02t\x00\x00"
    wire = FLEX.build({"name": "t", "cluster_id": "c"})
    assert wire == b"\x02t\x00" + b"\x01" + b"\x00\x02\x02c"
    parsed = FLEX.parse_stream(BufferReader(wire))
    assert parsed.cluster_id == "c" and parsed.current_leader == {"leader_id": -1, "leader_epoch": -1}


def test_unknown_tags_are_preserved_not_errors():
    wire = b"\x02t\x00" + b"\x02" + b"\x00\x02\x02c" + b"\x09\x03abc"
    parsed = FLEX.parse_stream(BufferReader(wire))
    assert parsed._unknown_tagged_fields == {9: b"abc"}
    assert FLEX.build(parsed) == wire


def test_strings_that_are_not_utf8_decode_as_java_does():
    # Kafka's readers build strings with `new String(bytes, UTF_8)`: malformed bytes become U+FFFD.
    assert String.compile().parse_stream(BufferReader(b"\x00\x04a\xff\xfeb")) == "a\ufffd\ufffdb"


def test_tagged_field_with_trailing_bytes_is_malformed():
    with pytest.raises(MalformedMessage):
        FLEX.parse_stream(BufferReader(b"\x02t\x00\x01\x00\x03\x02cX"))


def test_absent_fields_decode_as_default_and_refuse_non_default_values():
    parsed = FLEX.parse_stream(BufferReader(b"\x02t\x00\x00"))
    assert parsed.old_field == 0 and parsed.old_ignorable == 0
    assert FLEX.build({"name": "t", "old_ignorable": 5}) == b"\x02t\x00\x00"
    with pytest.raises(FieldNotInVersion):
        FLEX.build({"name": "t", "old_field": 5})


def test_records_decode_zero_copy():
    frame = bytearray(FLEX.build({"name": "t", "records": b"BATCH"}))
    parsed = FLEX.parse_stream(BufferReader(frame))
    assert isinstance(parsed.records, memoryview) and parsed.records == b"BATCH"
    frame[3] = ord("b")  # the view shares the frame's memory
    assert parsed.records == b"bATCH"


def test_uncompiled_constructs_work_too():
    assert Array(String).parse(b"\x00\x00\x00\x01\x00\x01a") == ["a"]


def test_decoded_structs_read_fields_as_attributes_and_missing_ones_as_errors_of_both_kinds():
    first, other = FieldDict(acks=-1, items=3), FieldDict(timeout_ms=5)
    for _ in range(2):  # the second read goes through the property the first one installed
        assert first.acks == -1 and first["acks"] == -1
        with pytest.raises(AttributeError):
            other.acks  # noqa: B018
        with pytest.raises(KeyError):
            other["acks"]
        assert getattr(other, "acks", "default") == "default" and not hasattr(other, "acks")
        assert other.get("acks") is None and "acks" not in other
    assert callable(first.items)  # dict's own attributes stay dict's
    first.acks = 1
    assert first.acks == 1 == first["acks"]
    with pytest.raises(AttributeError):
        FieldDict()._private  # noqa: B018
