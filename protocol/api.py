"""Requests and responses: frame payload <-> (header, body) for every served API and version.

This is the one place that picks the schema for a message: the API key and version choose the
body schema (`protocol/schemas/`), and the header version follows Kafka's rule:
- request header v2 for flexible versions, v1 otherwise, v0 only for ControlledShutdown v0;
- response header v1 for flexible versions, v0 otherwise, and always v0 for ApiVersions
  (so a client can read the answer before it knows which versions the broker speaks, KIP-511).

Bodies are `FieldDict`s (snake_case field names from Kafka's message specs). Building accepts
plain dicts; missing fields take Kafka's defaults. Decoding raises only `ProtocolError`s:
`UnsupportedApiKey`, `UnsupportedVersion` (both carry the correlation id, so a broker can still
answer), `MalformedMessage` (a header or body that is itself truncated or malformed).

Bytes after a complete request body are ignored, as Kafka's brokers do (`AbstractRequest.parseRequest`
reads the body and never looks at what follows): librdkafka up to at least 2.16 sends three extra
bytes after a Metadata v9+ request for all topics (confluentinc/librdkafka#5049). Responses, which
only our own brokers send us, must end where their body ends.
"""

from __future__ import annotations

import io
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from protocol import fetch_codec, produce_codec
from protocol.api_keys import ApiKey
from protocol.errors import MalformedMessage, UnsupportedApiKey, UnsupportedVersion
from protocol.schemas import APIS, headers
from protocol.types import BufferReader, FieldDict

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class ApiSchema:
    """One served API: its key, name, served version range and compiled schemas per version."""

    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    requests: dict
    responses: dict

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        if self.api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            return 0
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        if self.api_key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0


class _Compiled(dict):
    """version -> compiled construct schema, each compiled on first use (a version nobody asks
    for costs nothing: compiling every API's every version took about 0.45 s at each import,
    the start of every broker and every CLI command). Versions that share a shape share its
    compiled form. A version the mapping does not have raises KeyError."""

    def __init__(self, shapes: dict) -> None:
        super().__init__()
        self._shapes = shapes

    def __missing__(self, version: int):
        shape = self._shapes[version]
        compiled = _COMPILED.get(id(shape))
        if compiled is None:
            compiled = _COMPILED[id(shape)] = (shape, shape.compile())
        self[version] = compiled[1]
        return compiled[1]


#: id(shape) -> (shape, its compiled form): the shape is held so its id is never reused
_COMPILED: dict[int, tuple] = {}


#: api_key -> ApiSchema for every served API (built once at import, never mutated; each
#: version's compiled schema is made when first asked for).
SCHEMAS: dict[int, ApiSchema] = {
    key: ApiSchema(
        key,
        mod.NAME,
        mod.VERSIONS[0],
        mod.VERSIONS[1],
        mod.FLEXIBLE_FROM,
        _Compiled(mod.REQUEST),
        _Compiled(mod.RESPONSE),
    )
    for key, mod in APIS.items()
}
_REQUEST_HEADERS = _Compiled(headers.REQUEST_HEADER)
_RESPONSE_HEADERS = _Compiled(headers.RESPONSE_HEADER)


def _no_op() -> None:
    return None


@dataclass
class Request:
    """A decoded request: `header` (request_api_key, request_api_version, correlation_id,
    client_id) and `body` (the API's fields). `release` is set by the server: a handler calls it
    once the part of its work that must happen in request order is done (see broker/server.py);
    an inline handler whose ordered work ends after it returns sets `release_later` and calls it then."""

    header: FieldDict
    body: FieldDict
    release: Callable[[], None] = _no_op
    release_later: bool = False  # an inline handler that calls `release` itself once its ordered work is done
    listener: str = ""  # the name of the listener it arrived on (set by the server)
    peer: str = ""  # the client's "host:port" (set by the server)
    principal: str = "User:ANONYMOUS"  # who the connection authenticated as (set by the server)
    connection_id: str = ""  # the connection's id in this broker (set by the server)
    client_software: tuple[str, str] = ("", "")  # name, version from the connection's ApiVersions v3+ (the server)
    size: int = 0  # bytes of the request frame (set by the server; quotas)
    request_throttle_ms: int = 0  # the request quota's throttle time (set by the server)

    @property
    def user(self) -> str:
        """The principal's name, as quotas name users ("ANONYMOUS" when unauthenticated)."""
        return self.principal.split(":", 1)[1] if ":" in self.principal else self.principal

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def client_host(self) -> str:
        """The client's address as Kafka reports it in group descriptions: `/<ip>`."""
        return "/" + self.peer.rsplit(":", 1)[0].strip("[]") if self.peer else ""

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


def peek_header(frame) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the first 8 bytes, common to all header
    versions. Raises MalformedMessage on a frame shorter than that."""
    if len(frame) < 8:
        raise MalformedMessage(f"request of {len(frame)} bytes is shorter than a header")
    return _HEAD.unpack_from(frame)


def schema_for(api_key: int, api_version: int, correlation_id: int = -1) -> ApiSchema:
    """The served schema, or UnsupportedApiKey / UnsupportedVersion."""
    schema = SCHEMAS.get(api_key)
    if schema is None:
        raise UnsupportedApiKey(api_key, correlation_id)
    if not schema.min_version <= api_version <= schema.max_version:
        raise UnsupportedVersion(api_key, api_version, correlation_id, (schema.min_version, schema.max_version))
    return schema


def _parse_all(compiled, reader: BufferReader, what: str):
    # The compiled function directly: construct's parse_stream() would build a context Container
    # per call (~20% of a Produce decode) that our schemas never read.
    try:
        value = compiled.parsefunc(reader, None)
    except (struct.error, ValueError, OverflowError) as e:  # belt and braces; readers raise MalformedMessage
        raise MalformedMessage(f"{what}: {e}") from None
    return value


def decode_request(frame) -> Request:
    """Decode one request frame payload (without its size prefix). `records` fields are
    memoryviews into `frame`, so keep `frame` alive while they are used. Bytes after the body are
    ignored (Kafka's rule, see the module docstring)."""
    api_key, api_version, correlation_id = peek_header(frame)
    if api_key == ApiKey.PRODUCE or api_key == ApiKey.FETCH:  # their fast paths, else the generic decoder
        fast = (produce_codec if api_key == ApiKey.PRODUCE else fetch_codec).decode_request(frame)
        if fast is not None:
            return Request(*fast)
    schema = schema_for(api_key, api_version, correlation_id)
    reader = BufferReader(frame)
    header = _parse_all(_REQUEST_HEADERS[schema.request_header_version(api_version)], reader, "request header")
    body = _parse_all(schema.requests[api_version], reader, f"{schema.name} v{api_version} request")
    if reader.remaining():
        log.debug(
            "ignoring %d bytes after a %s v%d request from %r",
            reader.remaining(),
            schema.name,
            api_version,
            header.get("client_id"),
        )
    return Request(header, body)


def _encode(header_struct, header: dict, body_struct, body: dict, size_prefix: bool) -> bytes:
    buf = io.BytesIO()
    if size_prefix:
        buf.write(b"\0\0\0\0")
    header_struct.buildfunc(header, buf, None)
    body_struct.buildfunc(body, buf, None)
    if size_prefix:
        buf.getbuffer()[0:4] = _SIZE.pack(buf.tell() - 4)
    return buf.getvalue()


def _response_structs(api_key: int, api_version: int, correlation_id: int) -> tuple:
    """(response header struct, response body struct) for a request of (api_key, api_version)."""
    schema = schema_for(api_key, api_version, correlation_id)
    return _RESPONSE_HEADERS[schema.response_header_version(api_version)], schema.responses[api_version]


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: dict, *, size_prefix: bool = True
) -> bytes:
    """Encode a response to a request of (api_key, api_version): header + body, by default with
    the int32 size prefix ready for the socket."""
    header_struct, body_struct = _response_structs(api_key, api_version, correlation_id)
    return _encode(header_struct, {"correlation_id": correlation_id}, body_struct, body, size_prefix)


class _ScatterWriter:
    """A write-only stream for the compiled build functions that keeps large writes (record
    batches, `BY_REFERENCE` bytes or more) by reference instead of copying them: the encoded
    message is `parts`, small fields gathered into bytearrays between the large buffers."""

    BY_REFERENCE = 32768

    def __init__(self) -> None:
        self.parts: list = [bytearray(4)]  # the size prefix, filled in by finish()
        self.size = 0

    def write(self, data) -> int:
        n = len(data)
        if n >= self.BY_REFERENCE:
            self.parts.append(data)
            self.parts.append(bytearray())
        else:
            self.parts[-1] += data
        self.size += n
        return n

    def finish(self) -> list:
        self.parts[0][0:4] = _SIZE.pack(self.size)
        return [p for p in self.parts if len(p)]


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: dict) -> list:
    """`encode_response` with the size prefix, as a list of buffers whose concatenation is the
    frame: record batches of 32 KiB or more are referenced, not copied (for a vectored send; the
    buffers must not change until sent)."""
    if api_key == ApiKey.PRODUCE or api_key == ApiKey.FETCH:
        codec = produce_codec if api_key == ApiKey.PRODUCE else fetch_codec
        fast = codec.encode_response(api_version, correlation_id, body)
        if fast is not None:
            return fast
    header_struct, body_struct = _response_structs(api_key, api_version, correlation_id)
    out = _ScatterWriter()
    header_struct.buildfunc({"correlation_id": correlation_id}, out, None)
    body_struct.buildfunc(body, out, None)
    return out.finish()


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    body: dict,
    client_id: str | None = "minikafka",
    *,
    size_prefix: bool = True,
) -> bytes:
    """Encode a request (what a client sends), by default with the size prefix."""
    schema = schema_for(api_key, api_version, correlation_id)
    header = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    return _encode(
        _REQUEST_HEADERS[schema.request_header_version(api_version)],
        header,
        schema.requests[api_version],
        body,
        size_prefix,
    )


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, FieldDict]:
    """Decode a response frame payload to (correlation_id, body)."""
    schema = schema_for(api_key, api_version)
    reader = BufferReader(frame)
    header = _parse_all(_RESPONSE_HEADERS[schema.response_header_version(api_version)], reader, "response header")
    body = _parse_all(schema.responses[api_version], reader, f"{schema.name} v{api_version} response")
    if reader.remaining():
        raise MalformedMessage(f"{reader.remaining()} bytes after a {schema.name} v{api_version} response")
    return header.correlation_id, body


def served_api_versions() -> list[dict]:
    """The `api_keys` array of an ApiVersions response: every served API with its version range
    (ApiVersions v0-3, KIP-35/KIP-511)."""
    return [
        {"api_key": s.api_key, "min_version": s.min_version, "max_version": s.max_version}
        for s in sorted(SCHEMAS.values(), key=lambda s: s.api_key)
    ]
