"""broker.error_responses: the error answer of a request whose handler failed encodes at every
served version of every handled API, and names each of the request's entities."""

import pytest

from broker.error_responses import error_response
from broker.handlers import HANDLERS
from protocol.api import SCHEMAS, decode_request, decode_response, encode_request, encode_response
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.schemas import APIS

CASES = [(key, v) for key in sorted(HANDLERS) for v in range(SCHEMAS[key].min_version, SCHEMAS[key].max_version + 1)]


def _request(api_key: int, version: int, body: dict):
    frame = encode_request(api_key, version, 1, body, client_id="c")
    return decode_request(bytes(frame)[4:]).body


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_every_api_and_version_has_an_encodable_error_answer(api_key, version):
    body = _request(api_key, version, APIS[api_key].REQUEST[version].default())
    answer = error_response(api_key, version, body, ErrorCode.UNKNOWN_SERVER_ERROR, "internal error")
    if answer is None:  # only SASL/ApiVersions-style APIs without an error field would be closed
        pytest.fail(f"no error answer for {ApiKey(api_key).name} v{version}")
    encode_response(api_key, version, 1, answer)


def test_each_entity_of_the_request_gets_the_error():
    body = _request(
        ApiKey.PRODUCE,
        9,
        {"acks": -1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": None}]}]},
    )
    answer = error_response(ApiKey.PRODUCE, 9, body, ErrorCode.UNKNOWN_SERVER_ERROR, "x")
    _, decoded = decode_response(ApiKey.PRODUCE, 9, bytes(encode_response(ApiKey.PRODUCE, 9, 1, answer))[4:])
    part = decoded.responses[0].partition_responses[0]
    assert decoded.responses[0].name == "t" and part.index == 3 and part.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    body = _request(ApiKey.JOIN_GROUP, 5, {"group_id": "g", "protocol_type": "consumer", "protocols": []})
    answer = error_response(ApiKey.JOIN_GROUP, 5, body, ErrorCode.UNKNOWN_SERVER_ERROR)
    assert answer["error_code"] == ErrorCode.UNKNOWN_SERVER_ERROR
