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


def implementations(reference, compiled) -> list:
    """pytest params of a fast path's Python reference and its compiled twin (`minikafka_native`),
    the compiled one skipped when the extension is not built."""
    import pytest

    return [
        pytest.param(reference, id="python"),
        pytest.param(
            compiled,
            id="compiled",
            marks=pytest.mark.skipif(compiled is None, reason="minikafka_native is built by make setup"),
        ),
    ]


def mutations():
    """(overwrites, cut, kind) for `mutated`: up to 4 bytes overwritten at any position, up to 30
    bytes cut off the end, and the buffer type the frame arrives as."""
    from hypothesis import strategies as st

    return st.tuples(
        st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
        st.integers(0, 30),
        st.sampled_from([bytes, bytearray, memoryview]),
    )


def mutated(frame: bytes, mutation):
    """`frame` with a `mutations()` draw applied."""
    overwrites, cut, kind = mutation
    out = bytearray(frame)
    for at, value in overwrites:
        out[at % len(out)] = value
    return kind(out[: len(out) - cut] if cut < len(out) else out)


def as_list(decoded):
    """A decoder's answer, comparable: None, or [header, body]."""
    return None if decoded is None else list(decoded)


def joined(parts):
    """An encoder's answer, comparable: None, or the frame's bytes."""
    return None if parts is None else b"".join(parts)
