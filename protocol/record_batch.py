"""RecordBatch v2 (magic 2): the one module that looks inside record batches.

Format (Kafka protocol guide "Record Batch", KIP-98), all integers big-endian:

    offset  size  field
         0     8  base_offset
         8     4  batch_length            bytes after this field (total size - 12)
        12     4  partition_leader_epoch
        16     1  magic                   2 (v0/v1 message sets also carry magic at byte 16)
        17     4  crc                     CRC-32C (Castagnoli) of bytes 21..end
        21     2  attributes              bits 0-2 codec, 3 timestamp type, 4 transactional,
                                          5 control, 6 delete horizon
        23     4  last_offset_delta
        27     8  base_timestamp          ms
        35     8  max_timestamp           ms
        43     8  producer_id
        51     2  producer_epoch
        53     4  base_sequence
        57     4  records_count
        61        records (compressed as a whole when codec != 0)

A record: varint length, int8 attributes, varlong timestamp_delta, varint offset_delta,
varint key length (-1 = null) + key, varint value length + value, varint header count, then per
header varint key length + UTF-8 key, varint value length (-1 = null) + value. Varints are zig-zag.

The broker's hot path uses only `iter_batches` (header fields without decoding records),
`validate_batch` (CRC) and `stamp_batch` / `set_log_append_time`
(rewrite base offset, partition leader epoch, max timestamp in place). Every failure raises a
`CorruptRecordBatch` subclass.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import cramjam
import crc32c

from protocol.errors import CorruptRecordBatch, UnsupportedCompression, UnsupportedMagic

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted in batch_length
CRC_START = 21
MAGIC = 2

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODECS = {name: codec for codec, name in CODEC_NAMES.items()}
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_XERIAL_HEADER = b"\x82SNAPPY\x00"
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 batch, as stored (offsets absolute, timestamps in ms)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps at 2**31-1), or -1 without a producer sequence."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def with_base_offset(header: BatchHeader, base_offset: int) -> BatchHeader:
    """`header` with its base offset replaced (what `header._replace(base_offset=...)` gives, without
    its keyword processing: one per appended batch)."""
    return tuple.__new__(BatchHeader, (base_offset, *header[1:]))


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record(NamedTuple):
    """One decoded record; `offset` and `timestamp` are absolute (base + delta)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Read the batch header at `pos`. Raises UnsupportedMagic for magic != 2 and
    CorruptRecordBatch when the batch overruns `buf` or is shorter than a header."""
    end = len(buf)
    if end - pos < 17:
        raise CorruptRecordBatch(f"{end - pos} bytes at position {pos} are too few for a batch header")
    magic = buf[pos + 16]
    if magic != MAGIC:
        raise UnsupportedMagic(f"message format magic {magic} at position {pos}: only RecordBatch v2 is served")
    if end - pos < HEADER_SIZE:
        raise CorruptRecordBatch(f"{end - pos} bytes at position {pos} are too few for a v2 batch header")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordBatch(f"batch_length {header.batch_length} is shorter than a header")
    if header.size > end - pos:
        raise CorruptRecordBatch(f"batch of {header.size} bytes overruns the {end - pos} bytes left")
    if header.records_count < 0 or header.last_offset_delta < 0:
        raise CorruptRecordBatch(f"negative records_count {header.records_count} or last_offset_delta")
    return header


def iter_batches(buf, *, allow_partial_tail: bool = False) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in a records blob.

    A blob must be whole batches; with allow_partial_tail (a Fetch response cut at max_bytes) a
    trailing incomplete batch is skipped silently, as consumers do.
    """
    pos, end = 0, len(buf)
    while pos < end:
        if allow_partial_tail:
            if end - pos < LOG_OVERHEAD or _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD > end - pos:
                return
        header = read_header(buf, pos)
        yield pos, header
        pos += header.size


def compute_crc(buf, pos: int, header_size: int) -> int:
    """CRC-32C of the batch at `pos` from attributes to its end (`header_size` = total size)."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + header_size])


def validate_batch(buf, pos: int, header: BatchHeader) -> None:
    """Check the batch's CRC-32C; raises CorruptRecordBatch. (What a leader checks of a client's
    records on top of that is `protocol.record_validation.validate_client_batch`.)"""
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordBatch(f"CRC mismatch: stored {header.crc:#010x}, computed {actual:#010x}")


def stamp_batch(buf, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Rewrite base offset and partition leader epoch in place (`buf` writable). Neither field is
    covered by the CRC, so the batch stays valid without re-checksumming."""
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + 12, partition_leader_epoch)


def set_log_append_time(buf, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with max_timestamp = timestamp_ms, and re-checksum."""
    attributes = struct.unpack_from(">h", buf, pos + CRC_START)[0] | TIMESTAMP_TYPE_BIT
    struct.pack_into(">h", buf, pos + CRC_START, attributes)
    _I64.pack_into(buf, pos + 35, timestamp_ms)
    size = _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD
    _U32.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


# ---- compression ---------------------------------------------------------------------------


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """Compress a records payload as Kafka's Java producer does for `codec`. `level` is the
    codec's compression level (KIP-390: gzip 1-9, lz4 1-17, zstd -131072-22); None or, for gzip,
    -1 uses the codec's default."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        if level is None or level == -1:
            return bytes(cramjam.gzip.compress(data))
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:  # xerial framing, as snappy-java's SnappyOutputStream writes
        out = bytearray(_XERIAL_HEADER + _I32.pack(1) + _I32.pack(1))
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            out += _I32.pack(len(block)) + block
        return bytes(out)
    if codec == LZ4:  # LZ4 frame, independent blocks (KafkaLZ4BlockOutputStream)
        compressor = cramjam.lz4.Compressor(level=level, block_linked=False, content_checksum=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data) if level is None else cramjam.zstd.compress(data, level=level))
    raise UnsupportedCompression(f"compression codec {codec}")


def recompress(buf, pos: int, header: BatchHeader, codec: int, level: int | None = None) -> bytearray:
    """The batch at `pos` with its records compressed with `codec` instead (what a broker does
    for a topic whose compression.type is a codec other than the batch's, Kafka's LogValidator).
    The records themselves, the offsets, timestamps, producer fields and the other attributes
    stay as they are; the length, attributes and CRC are rewritten. Raises CorruptRecordBatch if
    the payload does not decompress."""
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    out = bytearray(buf[pos : pos + HEADER_SIZE]) + compress(codec, decompress(header.compression, payload), level)
    _I32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">h", out, CRC_START, (header.attributes & ~COMPRESSION_MASK) | codec)
    _U32.pack_into(out, 17, compute_crc(out, 0, len(out)))
    return out


def decompress(codec: int, data) -> bytes:
    """Inverse of `compress`; also reads raw (unframed) snappy as librdkafka writes it."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as e:
        raise CorruptRecordBatch(f"{CODEC_NAMES[codec]} payload does not decompress: {e}") from None
    raise UnsupportedCompression(f"compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_HEADER):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, pos = bytearray(), 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordBatch("truncated xerial snappy block length")
        n = _I32.unpack_from(data, pos)[0]
        if n < 0 or pos + 4 + n > len(data):
            raise CorruptRecordBatch("xerial snappy block overruns the payload")
        out += cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return bytes(out)


# ---- records --------------------------------------------------------------------------------


def read_varint(buf, pos: int, end: int, max_bytes: int = 10) -> tuple[int, int]:
    """Zig-zag varint (max_bytes 5) or varlong (10) at pos -> (value, next pos); raises
    CorruptRecordBatch when truncated or too long."""
    result = shift = 0
    for _i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordBatch("truncated varint in a record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptRecordBatch("varint longer than allowed in a record")


def _read_blob(buf, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos, end, 5)
    if n < 0:
        if n != -1:
            raise CorruptRecordBatch(f"negative length {n} in a record")
        return None, pos
    if pos + n > end:
        raise CorruptRecordBatch("a record field overruns its record")
    return bytes(buf[pos : pos + n]), pos + n


def decode_records(buf, pos: int = 0, header: BatchHeader | None = None) -> list[Record]:
    """Decode (decompressing if needed) the records of the batch at `pos`. Raises
    CorruptRecordBatch if they do not parse or their number differs from records_count."""
    header = header or read_header(buf, pos)
    payload: memoryview | bytes = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.compression != NONE:
        payload = decompress(header.compression, payload)
    return decode_payload(payload, header)


def decode_payload(payload, header: BatchHeader) -> list[Record]:
    """The records of a batch's records payload (already decompressed), with offsets and
    timestamps from `header`'s bases. Raises CorruptRecordBatch as `decode_records`."""
    records: list[Record] = []
    p, end = 0, len(payload)
    while p < end:
        if len(records) >= header.records_count:
            raise CorruptRecordBatch(f"more records than the header's records_count {header.records_count}")
        length, p = read_varint(payload, p, end, 5)
        rec_end = p + length
        if length < 0 or rec_end > end:
            raise CorruptRecordBatch(f"record length {length} overruns the batch")
        if rec_end - p < 1:
            raise CorruptRecordBatch("empty record")
        attributes = payload[p]
        ts_delta, p = read_varint(payload, p + 1, rec_end)
        off_delta, p = read_varint(payload, p, rec_end, 5)
        key, p = _read_blob(payload, p, rec_end)
        value, p = _read_blob(payload, p, rec_end)
        n_headers, p = read_varint(payload, p, rec_end, 5)
        if n_headers < 0 or n_headers > rec_end - p:
            raise CorruptRecordBatch(f"invalid header count {n_headers}")
        headers = []
        for _ in range(n_headers):
            hkey, p = _read_blob(payload, p, rec_end)
            if hkey is None:
                raise CorruptRecordBatch("null header key")
            hvalue, p = _read_blob(payload, p, rec_end)
            try:
                headers.append(Header(hkey.decode("utf-8"), hvalue))
            except UnicodeDecodeError:
                raise CorruptRecordBatch("header key is not UTF-8") from None
        if p != rec_end:
            raise CorruptRecordBatch(f"record has {rec_end - p} bytes beyond its fields")
        records.append(
            Record(
                header.base_offset + off_delta, header.base_timestamp + ts_delta, key, value, tuple(headers), attributes
            )
        )
    if len(records) != header.records_count:
        raise CorruptRecordBatch(f"header says {header.records_count} records, payload holds {len(records)}")
    return records


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong encoding (Kafka VARINT, VARLONG)."""
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _blob(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One record in v2 layout, length prefix included."""
    fields = [
        b"\x00",
        encode_varint(timestamp_delta),
        encode_varint(offset_delta),
        _blob(key),
        _blob(value),
        encode_varint(len(headers)),
    ]
    body = b"".join(fields + [_blob(k.encode("utf-8")) + _blob(v) for k, v in headers])
    return encode_varint(len(body)) + body


def build_batch(
    records: Sequence[tuple],
    *,
    base_offset: int = 0,
    compression: int = NONE,
    timestamp_ms: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Build a v2 batch from records given as (key, value) or (key, value, headers) or
    (key, value, headers, timestamp_ms). Timestamps default to `timestamp_ms` (now if None)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    stamps = [r[3] if len(r) > 3 and r[3] is not None else now for r in records]
    base_ts = stamps[0]
    body = b"".join(
        encode_record(i, ts - base_ts, r[0], r[1], r[2] if len(r) > 2 else ())
        for i, (r, ts) in enumerate(zip(records, stamps))
    )
    return batch_from_payload(
        body,
        len(records),
        base_timestamp=base_ts,
        max_timestamp=max(stamps),
        base_offset=base_offset,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        transactional=transactional,
        control=control,
        log_append_time=log_append_time,
    )


def batch_from_payload(
    body,
    records_count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    compression: int = NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """A v2 batch around `body`, `records_count` encoded records (offset deltas 0..count-1,
    timestamp deltas from `base_timestamp`): compressed with `compression`, header and CRC
    written."""
    attributes = (
        compression
        | (TIMESTAMP_TYPE_BIT if log_append_time else 0)
        | (TRANSACTIONAL_BIT if transactional else 0)
        | (CONTROL_BIT if control else 0)
    )
    payload = compress(compression, body)
    buf = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        len(buf) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        records_count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    _U32.pack_into(buf, 17, compute_crc(buf, 0, len(buf)))
    return bytes(buf)
