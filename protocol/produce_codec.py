"""The Produce fast path: Produce (key 0) v3-9 requests decoded, and their responses encoded, by
straight-line `struct` code instead of the generic compiled schemas (issue 22: at one record per
request the generic walk was a tenth of the broker's CPU per request).

Both produce exactly what the generic codec does (`tests/unit/test_produce_codec.py` compares them on
generated messages of every served version): the same `FieldDict`s with `records` as memoryviews
into the frame, the same bytes. Each handles only the shape nearly every producer sends and
returns None for anything else, which then goes the generic way, where errors are raised:
- a request with tagged fields (v9), a malformed or truncated one, or bytes the fast path does
  not expect;
- a response with record errors or an error message (KIP-467), or values out of their field's
  range.

Requests are decoded and responses encoded compiled (`minikafka_native`: `native/src/requests.rs`,
`responses.rs`) when `make setup` has built it; `reference_decode_request` and
`reference_encode_response` here are their references, and the tests hold them equal (every frame,
malformed ones included; every response body).

Wire formats: Kafka's ProduceRequest.json / ProduceResponse.json (v9 is flexible: compact
lengths, stored as N+1, and a tag section after the header, the body and every struct).
"""

from __future__ import annotations

import struct

from protocol.fast_codec import NATIVE, NATIVE_DECODER, FrameReader, write_length
from protocol.types import FieldDict

_HEAD = struct.Struct(">hhi")  # api key, api version, correlation id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_FIRST_VERSION, _FLEXIBLE, _LAST_VERSION = 3, 9, 9


def reference_decode_request(frame) -> tuple[FieldDict, FieldDict] | None:
    """(header, body) of a Produce v3-9 request frame payload (no size prefix), as the generic
    decoder gives them, or None to leave the frame to it. Bytes after the body are ignored."""
    try:
        return _decode(frame)
    except (IndexError, ValueError, LookupError, struct.error):
        return None


# `decode_request(frame)`: the compiled decoder (`native/src/requests.rs`) when built, which gives
# what the reference gives (tests/unit/test_produce_codec.py holds the two equal), else the reference
decode_request = NATIVE_DECODER.produce if NATIVE_DECODER is not None else reference_decode_request


def _decode(frame) -> tuple[FieldDict, FieldDict] | None:
    api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    if api_key != 0 or not _FIRST_VERSION <= version <= _LAST_VERSION:
        return None
    r = FrameReader(frame, 8, False)
    client_id = r.string(nullable=True)  # the header's client id is never compact
    r.flexible = version >= _FLEXIBLE
    r.no_tags()
    transactional_id = r.string(nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(frame, r.pos)
    r.pos += 6
    topic_data = []
    for _ in range(r.count()):
        name = r.string()
        partitions = []
        for _ in range(r.count()):
            index = r.i32()
            n = r.length()
            if n < -1:
                return None
            partitions.append(FieldDict(index=index, records=None if n == -1 else r.view_of(n)))
            r.no_tags()
        r.no_tags()
        topic_data.append(FieldDict(name=name, partition_data=partitions))
    r.no_tags()
    header = FieldDict(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    body = FieldDict(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=topic_data)
    return header, body


_PARTITION_V3 = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log start offset


def reference_encode_response(version: int, correlation_id: int, body) -> list | None:
    """A Produce v3-9 response as the generic encoder's buffers (one bytearray, the int32 size
    prefix included), or None to leave it to the generic encoder."""
    if not _FIRST_VERSION <= version <= _LAST_VERSION:
        return None
    try:
        out = _encode(version, correlation_id, body)
    except (KeyError, TypeError, AttributeError, struct.error, ValueError):
        return None
    return None if out is None else [out]


# `encode_response(version, correlation_id, body)`: compiled (`native/src/responses.rs`) when built,
# which gives what the reference gives (tests/unit/test_produce_codec.py holds the two equal)
encode_response = NATIVE.encode_produce_response if NATIVE is not None else reference_encode_response


def _encode(version: int, correlation_id: int, body) -> bytearray | None:
    flexible = version >= _FLEXIBLE
    out = bytearray(4)
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)  # response header tags
    responses = body["responses"]
    write_length(out, len(responses), flexible)
    for topic in responses:
        name = topic["name"].encode("utf-8")
        write_length(out, len(name), flexible, string=True)
        out += name
        parts = topic["partition_responses"]
        write_length(out, len(parts), flexible)
        for p in parts:
            if p.get("record_errors") or p.get("error_message") is not None:
                return None  # KIP-467 details: the generic encoder writes them
            if version >= 5:
                out += _PARTITION_V5.pack(
                    p["index"], p["error_code"], p["base_offset"], p["log_append_time_ms"], p["log_start_offset"]
                )
            else:
                out += _PARTITION_V3.pack(p["index"], p["error_code"], p["base_offset"], p["log_append_time_ms"])
            if version >= 8:
                # no record errors, a null error message (and, flexible, no tags)
                out += b"\x01\x00\x00" if flexible else b"\x00\x00\x00\x00\xff\xff"
        if flexible:
            out.append(0)
    out += _I32.pack(body.get("throttle_time_ms", 0))
    if flexible:
        out.append(0)
    _I32.pack_into(out, 0, len(out) - 4)
    return out
