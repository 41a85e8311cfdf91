"""The schema codec alone, for the fast-path tests to compare with (`protocol.api`'s decode and
encode take the fast paths for Produce and Fetch)."""

import struct

from protocol.api import _REQUEST_HEADERS, SCHEMAS, _parse_all, _response_structs, _ScatterWriter
from protocol.types import BufferReader


def generic_decode(api_key: int, frame):
    """(header, body) of a request frame payload by the compiled schemas."""
    version = struct.unpack_from(">h", frame, 2)[0]
    reader = BufferReader(frame)
    schema = SCHEMAS[api_key]
    header = _parse_all(_REQUEST_HEADERS[schema.request_header_version(version)], reader, "header")
    return header, _parse_all(schema.requests[version], reader, "body")


def generic_encode(api_key: int, version: int, correlation_id: int, body) -> bytes:
    """A response frame (size prefix included) by the compiled schemas."""
    header_struct, body_struct = _response_structs(api_key, version, correlation_id)
    out = _ScatterWriter()
    header_struct.buildfunc({"correlation_id": correlation_id}, out, None)
    body_struct.buildfunc(body, out, None)
    return b"".join(out.finish())
