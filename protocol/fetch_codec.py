"""The Fetch fast path: Fetch (key 1) v4-12 requests decoded, and their responses encoded, by
straight-line `struct` code instead of the generic compiled schemas (issue 22: every acks=-1
produce costs its leader a share of the followers' fetches, and the generic walk of a fetch was
a large part of one).

Like `produce_codec`, both give exactly what the generic codec gives
(`tests/unit/test_fetch_codec.py` compares them on generated messages of every served version):
the same `FieldDict`s, defaults of the fields a version lacks included, and the same bytes, record
batches of 32 KiB or more referenced rather than copied. Anything else is left to the generic
codec (None): tagged fields (v12), truncated or malformed requests; responses with fields this
encoder does not write (KIP-595's diverging epoch, current leader, snapshot id) or without the
fields the broker always sets, and values out of range.

Requests are decoded and responses encoded compiled (`minikafka_native`: `native/src/requests.rs`,
`responses.rs`) when `make setup` has built it; `reference_decode_request` and
`reference_encode_response` here are their references, and the tests hold them equal (every frame,
malformed ones included; every response body).

Wire formats: Kafka's FetchRequest.json / FetchResponse.json (v12 is flexible).
"""

from __future__ import annotations

import struct

from protocol.fast_codec import NATIVE, NATIVE_DECODER, FrameReader, write_length
from protocol.types import ZERO_UUID, FieldDict

_HEAD = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_WAITS = struct.Struct(">iiii")  # replica id, max wait, min bytes, max bytes
_SESSION = struct.Struct(">ii")
_FIRST_VERSION, _FLEXIBLE, _LAST_VERSION = 4, 12, 12
_BY_REFERENCE = 32768  # record blobs at least this large are sent from their own buffer


def reference_decode_request(frame) -> tuple[FieldDict, FieldDict] | None:
    """(header, body) of a Fetch v4-12 request frame payload (no size prefix), as the generic
    decoder gives them, or None to leave the frame to it."""
    try:
        return _decode(frame)
    except (IndexError, ValueError, LookupError, struct.error):
        return None


# `decode_request(frame)`: the compiled decoder (`native/src/requests.rs`) when built, which gives
# what the reference gives (tests/unit/test_fetch_codec.py holds the two equal), else the reference
decode_request = NATIVE_DECODER.fetch if NATIVE_DECODER is not None else reference_decode_request


def _decode(frame) -> tuple[FieldDict, FieldDict] | None:
    api_key, version, correlation_id, n = _HEAD.unpack_from(frame, 0)
    if api_key != 1 or not _FIRST_VERSION <= version <= _LAST_VERSION or n < -1:
        return None
    flexible = version >= _FLEXIBLE
    r = FrameReader(frame, 8, False)
    client_id = r.string(nullable=True)  # the header's client id is never compact
    r.flexible = flexible
    r.no_tags()
    replica_id, max_wait_ms, min_bytes, max_bytes = _WAITS.unpack_from(frame, r.pos)
    isolation_level = frame[r.pos + 16]
    if isolation_level > 127:
        isolation_level -= 256
    r.pos += 17
    session_id, session_epoch = 0, -1
    if version >= 7:
        session_id, session_epoch = _SESSION.unpack_from(frame, r.pos)
        r.pos += 8
    topics = []
    for _ in range(r.count()):
        name = r.string()
        partitions = []
        for _ in range(r.count()):
            partition = r.i32()
            current_leader_epoch = r.i32() if version >= 9 else -1
            fetch_offset = r.i64()
            last_fetched_epoch = r.i32() if version >= 12 else -1
            log_start_offset = r.i64() if version >= 5 else -1
            partition_max_bytes = r.i32()
            r.no_tags()
            partitions.append(
                FieldDict(
                    partition=partition,
                    current_leader_epoch=current_leader_epoch,
                    fetch_offset=fetch_offset,
                    last_fetched_epoch=last_fetched_epoch,
                    log_start_offset=log_start_offset,
                    partition_max_bytes=partition_max_bytes,
                )
            )
        r.no_tags()
        topics.append(FieldDict(topic=name, partitions=partitions, topic_id=ZERO_UUID))
    forgotten = []
    if version >= 7:
        for _ in range(r.count()):
            name = r.string()
            indexes = [r.i32() for _ in range(r.count())]
            r.no_tags()
            forgotten.append(FieldDict(topic=name, partitions=indexes, topic_id=ZERO_UUID))
    rack_id = r.string() if version >= 11 else ""
    r.no_tags()
    header = FieldDict(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    body = FieldDict(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        cluster_id=None,
        replica_state=FieldDict(replica_id=-1, replica_epoch=-1),
        session_id=session_id,
        session_epoch=session_epoch,
        topics=topics,
        forgotten_topics_data=forgotten,
        rack_id=rack_id,
    )
    return header, body


_BODY_KEYS = frozenset(("throttle_time_ms", "error_code", "session_id", "responses"))
_TOPIC_KEYS = frozenset(("topic", "partitions"))
_PARTITION_KEYS = frozenset(
    (
        "partition_index",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "aborted_transactions",
        "preferred_read_replica",
        "records",
    )
)
_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error code, HW, LSO, log start offset (v5+)
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")
_ABORTED = struct.Struct(">qq")


def reference_encode_response(version: int, correlation_id: int, body) -> list | None:
    """A Fetch v4-12 response as the generic encoder's buffers (the int32 size prefix in the
    first), or None to leave it to the generic encoder."""
    if not _FIRST_VERSION <= version <= _LAST_VERSION or body.keys() != _BODY_KEYS:
        return None
    try:
        return _encode(version, correlation_id, body)
    except (KeyError, TypeError, AttributeError, struct.error, ValueError):
        return None


# `encode_response(version, correlation_id, body)`: compiled (`native/src/responses.rs`) when built,
# which gives what the reference gives (tests/unit/test_fetch_codec.py holds the two equal)
encode_response = NATIVE.encode_fetch_response if NATIVE is not None else reference_encode_response


def _encode(version: int, correlation_id: int, body) -> list | None:
    flexible = version >= _FLEXIBLE
    out = bytearray(4)
    parts: list = [out]
    out += _I32.pack(correlation_id)
    if flexible:
        out.append(0)
    out += _I32.pack(body["throttle_time_ms"])
    if version >= 7:
        out += _I16.pack(body["error_code"])
        out += _I32.pack(body["session_id"])
    responses = body["responses"]
    write_length(out, len(responses), flexible)
    for topic in responses:
        if topic.keys() != _TOPIC_KEYS:
            return None
        name = topic["topic"].encode("utf-8")
        write_length(out, len(name), flexible, string=True)
        out += name
        partitions = topic["partitions"]
        write_length(out, len(partitions), flexible)
        for p in partitions:
            if p.keys() != _PARTITION_KEYS:
                return None
            if version >= 5:
                out += _PARTITION_HEAD.pack(
                    p["partition_index"],
                    p["error_code"],
                    p["high_watermark"],
                    p["last_stable_offset"],
                    p["log_start_offset"],
                )
            else:
                out += _PARTITION_HEAD_V4.pack(
                    p["partition_index"], p["error_code"], p["high_watermark"], p["last_stable_offset"]
                )
            aborted = p["aborted_transactions"]
            if aborted is None:
                write_length(out, -1, flexible)
            else:
                write_length(out, len(aborted), flexible)
                for t in aborted:
                    out += _ABORTED.pack(t["producer_id"], t["first_offset"])
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p["preferred_read_replica"])
            records = p["records"]
            if records is None:
                write_length(out, -1, flexible)
            else:
                n = len(records) if not isinstance(records, memoryview) else records.nbytes
                write_length(out, n, flexible)
                if n >= _BY_REFERENCE:
                    parts.append(records)
                    out = bytearray()
                    parts.append(out)
                else:
                    out += records
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    size = sum(len(x) if not isinstance(x, memoryview) else x.nbytes for x in parts) - 4
    _I32.pack_into(parts[0], 0, size)
    return [x for x in parts if len(x)]
