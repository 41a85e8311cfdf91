"""Raw v2 batches and records, damaged in each way a consumer could not read (issue 15 part 2):
shared by the validator's unit tests and the broker's error-response test."""

from protocol import record_batch as rb

CODECS = [rb.NONE, rb.GZIP, rb.SNAPPY, rb.LZ4, rb.ZSTD]
v = rb.encode_varint


def raw_record(*fields: bytes, length_delta: int = 0) -> bytes:
    """A record from already-encoded fields, with a length prefix (off by `length_delta`)."""
    body = b"".join(fields)
    return v(len(body) + length_delta) + body


def good(index: int) -> bytes:
    return rb.encode_record(index, index, b"key-%d" % index, b"value-%d" % index, [("h", b"x")])


def blob(data: bytes | None) -> bytes:
    return v(-1) if data is None else v(len(data)) + data


#: kind -> (the damaged record at batch index i, the message the validator gives)
DAMAGE = {
    "key past its record": (
        lambda i: raw_record(b"\0", v(0), v(i), v(50) + b"k", blob(b"v"), v(0)),
        "key of 50 bytes overruns",
    ),
    "negative value length": (
        lambda i: raw_record(b"\0", v(0), v(i), blob(b"k"), v(-5), v(0)),
        "invalid value length -5",
    ),
    "a million headers": (
        lambda i: raw_record(b"\0", v(0), v(i), blob(b"k"), blob(b"v"), v(10**6)),
        "invalid header count",
    ),
    "offset deltas out of order": (
        lambda i: raw_record(b"\0", v(0), v(i + 7), blob(b"k"), blob(b"v"), v(0)),
        "where .* was expected",
    ),
    "null header key": (
        lambda i: raw_record(b"\0", v(0), v(i), blob(b"k"), blob(b"v"), v(1), v(-1), blob(b"x")),
        "invalid header key length -1",
    ),
    "bytes after the fields": (
        lambda i: raw_record(b"\0", v(0), v(i), blob(b"k"), blob(b"v"), v(0), b"junk"),
        "4 bytes beyond its fields",
    ),
    "fields past the record": (
        lambda i: raw_record(b"\0", v(0), v(i), blob(b"k"), blob(b"value"), v(0), length_delta=-3),
        "overruns its record",
    ),
    "truncated varint": (lambda i: raw_record(b"\0", b"\xff\xff"), "truncated timestamp delta varint"),
}


def batch(records: list[bytes], codec: int = rb.NONE, **header) -> bytes:
    """A v2 batch around raw records (CRC and lengths right, records as given)."""
    payload = rb.compress(codec, b"".join(records))
    buf = bytearray(rb.HEADER_SIZE) + payload
    attributes = codec | header.get("attributes", 0)
    rb.HEADER.pack_into(
        buf,
        0,
        0,
        len(buf) - rb.LOG_OVERHEAD,
        -1,
        rb.MAGIC,
        0,
        attributes,
        len(records) - 1,
        1_000_000,
        1_000_000,
        header.get("producer_id", -1),
        header.get("producer_epoch", -1),
        header.get("base_sequence", -1),
        len(records),
    )
    rb._U32.pack_into(buf, 17, rb.compute_crc(buf, 0, len(buf)))
    return bytes(buf)
