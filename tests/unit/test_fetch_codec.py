"""`protocol.fetch_codec`, the Fetch fast path: on every served version it decodes what the
generic schema decoder decodes (defaults of absent fields included) and encodes the bytes the
generic encoder writes; what it does not handle it leaves to the generic codec (None)."""

import codec_helpers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import fetch_codec
from protocol.api import (
    decode_request,
    encode_request,
    encode_response_parts,
)
from protocol.api_keys import ApiKey
from protocol.types import FieldDict

# the Python reference and the compiled twin (`native/src/requests.rs`, `responses.rs`) answer alike
DECODERS = codec_helpers.implementations(
    fetch_codec.reference_decode_request, fetch_codec.NATIVE_DECODER and fetch_codec.NATIVE_DECODER.fetch
)
ENCODERS = codec_helpers.implementations(
    fetch_codec.reference_encode_response, fetch_codec.NATIVE and fetch_codec.NATIVE.encode_fetch_response
)

VERSIONS = st.integers(4, 12)
TEXT = st.text(max_size=12)
INT8 = st.integers(-128, 127)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def requests(draw, version):
    def partition():
        p = {"partition": draw(INT32), "fetch_offset": draw(INT64), "partition_max_bytes": draw(INT32)}
        if version >= 9:
            p["current_leader_epoch"] = draw(INT32)
        if version >= 12:
            p["last_fetched_epoch"] = draw(INT32)
        if version >= 5:
            p["log_start_offset"] = draw(INT64)
        return p

    body = {
        "replica_id": draw(INT32),
        "max_wait_ms": draw(INT32),
        "min_bytes": draw(INT32),
        "max_bytes": draw(INT32),
        "isolation_level": draw(INT8),
        "topics": [
            {"topic": draw(TEXT), "partitions": [partition() for _ in range(draw(st.integers(0, 3)))]}
            for _ in range(draw(st.integers(0, 3)))
        ],
    }
    if version >= 7:
        body["session_id"] = draw(INT32)
        body["session_epoch"] = draw(INT32)
        body["forgotten_topics_data"] = draw(
            st.lists(st.fixed_dictionaries({"topic": TEXT, "partitions": st.lists(INT32, max_size=3)}), max_size=2)
        )
    if version >= 11:
        body["rack_id"] = draw(TEXT)
    return body


def generic_decode(frame):
    return codec_helpers.generic_decode(ApiKey.FETCH, frame)


def generic_encode(version, correlation_id, body) -> bytes:
    return codec_helpers.generic_encode(ApiKey.FETCH, version, correlation_id, body)


def field_dicts_everywhere(value) -> bool:
    if isinstance(value, dict):
        return type(value) is FieldDict and all(field_dicts_everywhere(v) for v in value.values())
    if isinstance(value, list):
        return all(field_dicts_everywhere(v) for v in value)
    return True


@pytest.mark.parametrize("decode", DECODERS)
@settings(max_examples=300, deadline=None)
@given(st.data(), VERSIONS, st.one_of(st.none(), TEXT), INT32)
def test_requests_decode_as_the_schema_decodes_them(decode, data, version, client_id, correlation_id):
    body = data.draw(requests(version))
    frame = encode_request(ApiKey.FETCH, version, correlation_id, body, client_id)[4:]
    fast = decode(frame)
    assert fast is not None  # every untagged request of a served version takes the fast path
    assert list(fast) == list(generic_decode(frame))
    assert field_dicts_everywhere(fast[1])  # handlers read fields as attributes


@pytest.mark.parametrize("decode", DECODERS)
@settings(max_examples=200, deadline=None)
@given(st.data(), VERSIONS, st.integers(1, 40))
def test_truncated_requests_are_left_to_the_generic_decoder(decode, data, version, cut):
    frame = encode_request(ApiKey.FETCH, version, 7, data.draw(requests(version)), "c")[4:]
    truncated = frame[: max(0, len(frame) - cut)]
    try:
        generic_decode(truncated)
    except Exception:
        assert decode(truncated) is None


@pytest.mark.parametrize("decode", DECODERS)
def test_tagged_fields_go_the_generic_way(decode):
    body = {"replica_id": -1, "max_wait_ms": 5, "min_bytes": 1, "max_bytes": 100, "isolation_level": 0, "topics": []}
    v12 = encode_request(ApiKey.FETCH, 12, 1, body, None)[4:]
    assert decode(v12) is not None
    tagged = v12[:-1] + b"\x01\x00\x03\x03ab"  # the body's tag section: ClusterId (tag 0) = "ab"
    assert decode(tagged) is None
    assert decode_request(tagged).body.cluster_id == "ab"


@pytest.mark.skipif(fetch_codec.NATIVE_DECODER is None, reason="minikafka_native is built by make setup")
@settings(max_examples=200, deadline=None)
@given(st.data(), VERSIONS, codec_helpers.mutations())
def test_the_compiled_decoder_answers_any_frame_as_the_reference_does(data, version, mutation):
    """Bytes overwritten anywhere (bad lengths, invalid UTF-8, tags, other keys and versions) and
    frames cut short: the compiled decoder gives what the Python reference gives, None included."""
    body = data.draw(requests(version))
    frame = codec_helpers.mutated(
        encode_request(ApiKey.FETCH, version, 7, body, data.draw(st.one_of(st.none(), TEXT)))[4:], mutation
    )
    reference, compiled = fetch_codec.reference_decode_request, fetch_codec.NATIVE_DECODER.fetch
    assert codec_helpers.as_list(compiled(frame)) == codec_helpers.as_list(reference(frame))


RECORDS = st.one_of(st.none(), st.binary(max_size=60), st.just(b"r" * 40000))


@st.composite
def responses(draw, version):
    def partition():
        return {
            "partition_index": draw(INT32),
            "error_code": draw(INT16),
            "high_watermark": draw(INT64),
            "last_stable_offset": draw(INT64),
            "log_start_offset": draw(INT64),
            "aborted_transactions": draw(
                st.one_of(
                    st.none(),
                    st.lists(st.fixed_dictionaries({"producer_id": INT64, "first_offset": INT64}), max_size=2),
                )
            ),
            "preferred_read_replica": draw(INT32),
            "records": draw(RECORDS),
        }

    return {
        "throttle_time_ms": draw(INT32),
        "error_code": draw(INT16),
        "session_id": draw(INT32),
        "responses": [
            {"topic": draw(TEXT), "partitions": [partition() for _ in range(draw(st.integers(0, 3)))]}
            for _ in range(draw(st.integers(0, 3)))
        ],
    }


@pytest.mark.parametrize("encode", ENCODERS)
@settings(max_examples=300, deadline=None)
@given(st.data(), VERSIONS, INT32)
def test_responses_encode_as_the_schema_encodes_them(encode, data, version, correlation_id):
    body = data.draw(responses(version))
    if version < 11:  # fields a version lacks must not be set for the generic encoder
        for t in body["responses"]:
            for p in t["partitions"]:
                p["preferred_read_replica"] = -1
    if version < 7:
        body["error_code"], body["session_id"] = 0, 0
    if version < 5:
        for t in body["responses"]:
            for p in t["partitions"]:
                p["log_start_offset"] = -1
    fast = encode(version, correlation_id, body)
    assert fast is not None
    assert b"".join(fast) == generic_encode(version, correlation_id, body)
    big = [
        p["records"] for t in body["responses"] for p in t["partitions"] if p["records"] and len(p["records"]) >= 32768
    ]
    assert all(any(part is r for part in fast) for r in big)  # large record blobs are referenced, not copied
    assert b"".join(encode_response_parts(ApiKey.FETCH, version, correlation_id, body)) == b"".join(fast)


@pytest.mark.parametrize("encode", ENCODERS)
def test_responses_with_fields_it_does_not_write_go_the_generic_way(encode):
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1,
                 "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}  # fmt: skip
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "t", "partitions": [partition]}],
    }
    assert encode(12, 1, body) is not None
    partition["diverging_epoch"] = {"epoch": 3, "end_offset": 10}
    assert encode(12, 1, body) is None
    assert b"".join(encode_response_parts(ApiKey.FETCH, 12, 1, body)) == generic_encode(12, 1, body)


#: what a field may hold when it is not what the encoder expects: any type, any range
ODD = st.one_of(
    INT64,
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=False),
    st.none(),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.just(bytearray(b"r" * 40000)),
)
NAMES = st.one_of(TEXT, st.just("\ud800"), st.just(b"t"), st.none())


@pytest.mark.skipif(fetch_codec.NATIVE is None, reason="minikafka_native is built by make setup")
@settings(max_examples=200, deadline=None)
@given(st.data(), VERSIONS, INT32)
def test_the_compiled_encoder_answers_any_body_as_the_reference_does(data, version, correlation_id):
    """Fields replaced by values of any type or range, keys added or taken away, names that do
    not encode, records as bytes, bytearrays or memoryviews: the compiled encoder gives the bytes
    the Python reference gives (large blobs referenced, not copied), or None where it does."""
    body = data.draw(responses(version))
    for t in body["responses"]:
        if data.draw(st.booleans()):
            t["topic"] = data.draw(NAMES)
        for p in t["partitions"]:
            for key in data.draw(st.lists(st.sampled_from(sorted(p)), max_size=2)):
                p[key] = data.draw(ODD)
            if isinstance(p.get("records"), bytes) and data.draw(st.booleans()):
                p["records"] = data.draw(st.sampled_from([bytearray, memoryview]))(p["records"])
            if data.draw(st.integers(0, 9)) == 0:
                p.pop("records") if data.draw(st.booleans()) else p.update(diverging_epoch=None)
    if data.draw(st.booleans()):
        body[data.draw(st.sampled_from(["throttle_time_ms", "error_code", "session_id"]))] = data.draw(ODD)
    compiled = fetch_codec.NATIVE.encode_fetch_response(version, correlation_id, body)
    reference = fetch_codec.reference_encode_response(version, correlation_id, body)
    assert codec_helpers.joined(compiled) == codec_helpers.joined(reference)
    if compiled is not None:
        assert [type(part) for part in compiled] == [type(part) for part in reference]
        assert all(a is b for a, b in zip(compiled, reference) if type(a) is not bytearray)  # referenced blobs
