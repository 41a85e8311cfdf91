"""`protocol.produce_codec`, the Produce fast path: on every served version it decodes what the
generic schema decoder decodes and encodes the bytes the generic encoder writes; what it does not
handle it leaves to the generic codec (None), and the shapes producers send are handled."""

import struct

import codec_helpers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka_cli.perf_tools.connections import produce_frame
from protocol import produce_codec
from protocol.api import (
    decode_request,
    encode_request,
    encode_response_parts,
)
from protocol.api_keys import ApiKey

# the Python reference and the compiled twin (`native/src/requests.rs`, `responses.rs`) answer alike
DECODERS = codec_helpers.implementations(
    produce_codec.reference_decode_request, produce_codec.NATIVE_DECODER and produce_codec.NATIVE_DECODER.produce
)
ENCODERS = codec_helpers.implementations(
    produce_codec.reference_encode_response, produce_codec.NATIVE and produce_codec.NATIVE.encode_produce_response
)

VERSIONS = st.integers(3, 9)
TEXT = st.text(max_size=20)
RECORDS = st.one_of(st.none(), st.binary(max_size=80))
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

REQUESTS = st.fixed_dictionaries(
    {
        "transactional_id": st.one_of(st.none(), TEXT),
        "acks": INT16,
        "timeout_ms": INT32,
        "topic_data": st.lists(
            st.fixed_dictionaries(
                {
                    "name": TEXT,
                    "partition_data": st.lists(st.fixed_dictionaries({"index": INT32, "records": RECORDS}), max_size=3),
                }
            ),
            max_size=3,
        ),
    }
)


def generic_decode(frame):
    return codec_helpers.generic_decode(ApiKey.PRODUCE, frame)


def generic_encode(version, correlation_id, body) -> bytes:
    return codec_helpers.generic_encode(ApiKey.PRODUCE, version, correlation_id, body)


def materialized(value):
    """memoryviews as bytes, so decoded messages compare by content."""
    if isinstance(value, dict):
        return {k: materialized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialized(v) for v in value]
    return bytes(value) if isinstance(value, memoryview) else value


@pytest.mark.parametrize("decode", DECODERS)
@settings(max_examples=300, deadline=None)
@given(VERSIONS, st.one_of(st.none(), TEXT), INT32, REQUESTS)
def test_requests_decode_as_the_schema_decodes_them(decode, version, client_id, correlation_id, body):
    frame = encode_request(ApiKey.PRODUCE, version, correlation_id, body, client_id)[4:]
    fast = decode(frame)
    assert fast is not None  # every untagged request of a served version takes the fast path
    assert materialized(list(fast)) == materialized(list(generic_decode(frame)))
    assert all(type(part) is memoryview for t in fast[1].topic_data for part in
               [p.records for p in t.partition_data if p.records is not None])  # fmt: skip


@pytest.mark.parametrize("decode", DECODERS)
@settings(max_examples=200, deadline=None)
@given(VERSIONS, REQUESTS, st.integers(1, 60))
def test_truncated_requests_are_left_to_the_generic_decoder(decode, version, body, cut):
    frame = encode_request(ApiKey.PRODUCE, version, 7, body, "c")[4:]
    truncated = frame[: max(0, len(frame) - cut)]
    try:
        generic_decode(truncated)
    except Exception:  # the generic decoder refuses it: so must the fast path (it answers None)
        assert decode(truncated) is None


@pytest.mark.parametrize("decode", DECODERS)
def test_tagged_fields_and_unserved_versions_go_the_generic_way(decode):
    frame = bytearray(produce_frame("t", 0, 10, -1)[4:])  # v9
    assert decode(frame) is not None
    struct.pack_into(">h", frame, 2, 10)
    assert decode(frame) is None
    v9 = encode_request(ApiKey.PRODUCE, 9, 1, {"acks": 1, "timeout_ms": 5, "topic_data": []}, None)[4:]
    tagged = v9[:10] + b"\x01\x00\x00" + v9[11:]  # a header tag (tag 0, no bytes) after a null client_id
    assert decode(tagged) is None
    assert decode_request(tagged).body.acks == 1  # the generic decoder reads past the tag


@pytest.mark.skipif(produce_codec.NATIVE_DECODER is None, reason="minikafka_native is built by make setup")
@settings(max_examples=200, deadline=None)
@given(st.data(), VERSIONS, codec_helpers.mutations())
def test_the_compiled_decoder_answers_any_frame_as_the_reference_does(data, version, mutation):
    """Bytes overwritten anywhere (bad lengths, invalid UTF-8, tags, other keys and versions) and
    frames cut short: the compiled decoder gives what the Python reference gives, None included."""
    body = data.draw(REQUESTS)
    frame = codec_helpers.mutated(
        encode_request(ApiKey.PRODUCE, version, 7, body, data.draw(st.one_of(st.none(), TEXT)))[4:], mutation
    )
    reference, compiled = produce_codec.reference_decode_request, produce_codec.NATIVE_DECODER.produce
    assert materialized(codec_helpers.as_list(compiled(frame))) == materialized(codec_helpers.as_list(reference(frame)))


PARTITION_RESPONSES = st.fixed_dictionaries(
    {
        "index": INT32,
        "error_code": INT16,
        "base_offset": INT64,
        "log_append_time_ms": INT64,
        "log_start_offset": INT64,
    },
    optional={
        "record_errors": st.lists(
            st.fixed_dictionaries({"batch_index": INT32, "batch_index_error_message": st.one_of(st.none(), TEXT)}),
            max_size=2,
        ),
        "error_message": st.one_of(st.none(), TEXT),
    },
)
RESPONSES = st.fixed_dictionaries(
    {
        "responses": st.lists(
            st.fixed_dictionaries({"name": TEXT, "partition_responses": st.lists(PARTITION_RESPONSES, max_size=3)}),
            max_size=3,
        ),
        "throttle_time_ms": INT32,
    }
)


@pytest.mark.parametrize("encode", ENCODERS)
@settings(max_examples=300, deadline=None)
@given(VERSIONS, INT32, RESPONSES)
def test_responses_encode_as_the_schema_encodes_them(encode, version, correlation_id, body):
    fast = encode(version, correlation_id, body)
    details = any(
        p.get("record_errors") or p.get("error_message") is not None
        for t in body["responses"]
        for p in t["partition_responses"]
    )
    if details:
        assert fast is None
    else:
        assert fast is not None and b"".join(fast) == generic_encode(version, correlation_id, body)
    assert b"".join(encode_response_parts(ApiKey.PRODUCE, version, correlation_id, body)) == generic_encode(
        version, correlation_id, body
    )


@pytest.mark.parametrize("encode", ENCODERS)
def test_out_of_range_values_go_the_generic_way(encode):
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 2**31, "error_code": 0,
            "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0}]}]}  # fmt: skip
    assert encode(9, 1, body) is None


#: what a field may hold when it is not what the encoder expects: any type, any range
ODD = st.one_of(
    INT64, st.integers(-(2**70), 2**70), st.booleans(), st.floats(allow_nan=False), st.none(), st.text(max_size=3)
)
NAMES = st.one_of(TEXT, st.just("\ud800"), st.just(b"t"), st.none())


@pytest.mark.skipif(produce_codec.NATIVE is None, reason="minikafka_native is built by make setup")
@settings(max_examples=200, deadline=None)
@given(st.data(), VERSIONS, INT32, RESPONSES)
def test_the_compiled_encoder_answers_any_body_as_the_reference_does(data, version, correlation_id, body):
    """Fields replaced by values of any type or range, names that do not encode: the compiled
    encoder gives the bytes the Python reference gives, or None where it does."""
    for t in body["responses"]:
        if data.draw(st.booleans()):
            t["name"] = data.draw(NAMES)
        for p in t["partition_responses"]:
            for key in data.draw(st.lists(st.sampled_from(sorted(p)), max_size=2)):
                p[key] = data.draw(ODD)
    if data.draw(st.booleans()):
        body["throttle_time_ms"] = data.draw(ODD)
    compiled = produce_codec.NATIVE.encode_produce_response(version, correlation_id, body)
    assert codec_helpers.joined(compiled) == codec_helpers.joined(
        produce_codec.reference_encode_response(version, correlation_id, body)
    )
    assert compiled is None or all(type(part) is bytearray for part in compiled)
