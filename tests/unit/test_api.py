"""Request/response codec: header versions, error paths, and fuzzed frames."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api import SCHEMAS, decode_request, decode_response, encode_request, encode_response
from protocol.errors import MalformedMessage, ProtocolError, UnsupportedApiKey, UnsupportedVersion
from protocol.framing import FrameDecoder

PRODUCE = {
    "transactional_id": None,
    "acks": -1,
    "timeout_ms": 1500,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"opaque"}]}],
}


def _payload(frame: bytes) -> bytes:
    (payload,) = FrameDecoder().feed(frame)
    return payload


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_request_round_trip_all_versions(version):
    req = decode_request(_payload(encode_request(0, version, 42, PRODUCE, client_id="c1")))
    assert (req.api_key, req.api_version, req.correlation_id) == (0, version, 42)
    assert req.header.client_id == "c1"
    assert req.body.topic_data[0].partition_data[0].records == b"opaque"


def test_header_versions_follow_kafkas_rules():
    # ControlledShutdown v0 (request header v0: no client id at all) names no broker epoch: not
    # served (issue 34), refused as an unsupported version, as are the controller requests'.
    with pytest.raises(UnsupportedVersion):
        decode_request(b"\x00\x07\x00\x00\x00\x00\x00\x05" + b"\x00\x00\x00\x01")
    for api_key, first in ((4, 2), (5, 1), (6, 5), (7, 2)):
        with pytest.raises(UnsupportedVersion):
            decode_request(b"\x00" + bytes([api_key]) + (first - 1).to_bytes(2, "big") + b"\x00\x00\x00\x05\x00\x00")
    # Flexible request (Metadata v9+) -> header v2: client id stays a non-compact string + tags.
    frame = _payload(encode_request(3, 12, 5, {"topics": None}, client_id="ab"))
    assert frame[8:13] == b"\x00\x02ab\x00"
    # ApiVersions v3 is flexible, yet its response header is v0 (no tagged fields).
    resp = _payload(encode_response(18, 3, 9, {"api_keys": []}))
    assert resp[:4] == (9).to_bytes(4, "big") and resp[4:6] == b"\x00\x00"
    # Other flexible responses carry header v1 (an empty tag section after the correlation id).
    resp = _payload(encode_response(3, 12, 9, {}))
    assert resp[4] == 0


def test_response_round_trip():
    body = {
        "throttle_time_ms": 3,
        "responses": [
            {
                "name": "t",
                "partition_responses": [{"index": 1, "error_code": 6, "base_offset": 100, "log_start_offset": 7}],
            }
        ],
    }
    corr, parsed = decode_response(0, 9, _payload(encode_response(0, 9, 77, body)))
    assert corr == 77 and parsed.responses[0].partition_responses[0].base_offset == 100


def test_unknown_api_key_carries_correlation_id():
    with pytest.raises(UnsupportedApiKey) as err:
        decode_request(b"\x03\xe7\x00\x00\x00\x00\x00\x2a")
    assert err.value.api_key == 999 and err.value.correlation_id == 42


def test_unsupported_version_carries_what_a_broker_needs_to_answer():
    frame = _payload(encode_request(18, 3, 11, {}))
    frame = frame[:2] + (99).to_bytes(2, "big") + frame[4:]
    with pytest.raises(UnsupportedVersion) as err:
        decode_request(frame)
    assert (err.value.api_key, err.value.api_version, err.value.correlation_id) == (18, 99, 11)
    assert err.value.served == (0, 3) and err.value.error_code == 35


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_versions_below_served_are_refused(version):
    with pytest.raises(UnsupportedVersion):
        decode_request(b"\x00\x00" + version.to_bytes(2, "big") + b"\x00\x00\x00\x01\x00\x00")


def test_truncated_bodies_are_malformed_and_bytes_after_a_body_are_ignored():
    frame = _payload(encode_request(0, 7, 1, PRODUCE))
    for cut in (3, 9, len(frame) // 2, len(frame) - 1):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])
    # Kafka parses the body and ignores what follows it.
    for extra in (b"\x00", b"\x01\x00\x00", b"\xff" * 100):
        req = decode_request(frame + extra)
        assert req.body == decode_request(frame).body


def test_librdkafka_metadata_for_all_topics_decodes():
    # confluent-kafka 2.16.1 / librdkafka 2.16.0 `AdminClient.list_topics()`, captured: Metadata v12 with
    # null topics (all of them), then three bytes that are no part of the body (librdkafka#5049).
    frame = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    req = decode_request(frame)
    assert (req.api_key, req.api_version, req.header.client_id) == (3, 12, "rdkafka")
    assert req.body.topics is None and req.body.allow_auto_topic_creation is False


def test_responses_must_end_with_their_body():
    frame = _payload(encode_response(3, 12, 9, {}))
    with pytest.raises(MalformedMessage, match="bytes after"):
        decode_response(3, 12, frame + b"\x00")


VALID = [
    _payload(encode_request(s.api_key, v, 1, {})) for s in SCHEMAS.values() for v in (s.min_version, s.max_version)
] + [_payload(encode_request(0, 9, 1, PRODUCE))]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(data):
    try:
        decode_request(data)
    except ProtocolError:
        pass


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(VALID),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    st.integers(0, 10**6),
)
def test_mutated_frames_raise_only_protocol_errors(frame, flips, cut):
    data = bytearray(frame)
    for pos, value in flips:
        data[pos % len(data)] = value
    try:
        decode_request(bytes(data[: max(8, cut % (len(data) + 1))]))
    except ProtocolError:
        pass


@pytest.mark.parametrize("version", [4, 11, 12])
def test_response_parts_are_the_encoded_frame_with_large_batches_by_reference(version):
    from protocol.api import encode_response_parts

    big, small = bytes(range(256)) * 200, b"tiny batch"  # 51,200 and 10 bytes
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partition_index": i,
                        "error_code": 0,
                        "high_watermark": 5,
                        "last_stable_offset": 5,
                        "log_start_offset": 0,
                        "records": records,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                    }
                    for i, records in enumerate([big, small, None, big])
                ],
            }
        ],
    }
    parts = encode_response_parts(1, version, 77, body)
    assert b"".join(parts) == encode_response(1, version, 77, body)
    # prefix + fields, big, fields, big, and (flexible versions) the tagged-field tail
    assert sum(p is big for p in parts) == 2 and len(parts) == (5 if version >= 12 else 4)
    assert encode_response_parts(3, 9, 1, {"brokers": [], "topics": []}) == [
        encode_response(3, 9, 1, {"brokers": [], "topics": []})
    ]
