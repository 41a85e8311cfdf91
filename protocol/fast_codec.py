"""What the hand-written fast paths (`produce_codec`, `fetch_codec`) share: a cursor over a
request frame and a length writer for responses, for Kafka's primitive types plain or compact
(flexible versions: lengths stored as N+1 in an unsigned varint). Every read past the frame
raises IndexError or struct.error and a bad length ValueError, which the fast paths answer by
leaving the frame to the generic decoder.

`NATIVE` is the compiled extension (`minikafka_native`) and `NATIVE_DECODER` its decoder of both
requests, or None when the extension is not built; the Python codecs are their reference."""

from __future__ import annotations

import logging
import struct

from protocol.types import ZERO_UUID, FieldDict

log = logging.getLogger(__name__)

try:  # both fast paths compiled (`native/src/requests.rs`, `responses.rs`, built by `make setup`)
    import minikafka_native as NATIVE
except ImportError:  # pragma: no cover - the Python references then decode and encode
    NATIVE = None
    log.warning(
        "minikafka_native is not installed: Produce and Fetch are decoded and encoded in Python; run `make setup`"
    )
NATIVE_DECODER = NATIVE.RequestDecoder(FieldDict, ZERO_UUID) if NATIVE is not None else None

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class FrameReader:
    __slots__ = ("buf", "view", "pos", "end", "flexible")

    def __init__(self, frame, pos: int, flexible: bool) -> None:
        self.buf, self.view, self.pos, self.end, self.flexible = frame, memoryview(frame), pos, len(frame), flexible

    def uvarint(self) -> int:
        """An unsigned varint of at most 5 bytes (ValueError when longer)."""
        buf, pos = self.buf, self.pos
        result = shift = 0
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def i32(self) -> int:
        value = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def i64(self) -> int:
        value = _I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return value

    def length(self, string: bool = False) -> int:
        """A length prefix, -1 for null: compact, or int16 (strings) / int32 (arrays, bytes)."""
        if self.flexible:
            return self.uvarint() - 1
        if string:
            n = _I16.unpack_from(self.buf, self.pos)[0]
            self.pos += 2
            return n
        return self.i32()

    def count(self) -> int:
        """An array length (the fast paths' arrays are never null)."""
        n = self.length()
        if n < 0:
            raise ValueError("bad array length")
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.length(string=True)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise ValueError("bad string length")
        return str(self.view_of(n), "utf-8", "replace")

    def view_of(self, n: int) -> memoryview:
        """The next `n` bytes, as a memoryview into the frame (IndexError past its end)."""
        if n < 0 or self.pos + n > self.end:
            raise IndexError("overruns the frame")
        view = self.view[self.pos : self.pos + n]
        self.pos += n
        return view

    def no_tags(self) -> None:
        """The end of a flexible struct: only an empty tag section goes the fast way."""
        if self.flexible:
            if self.buf[self.pos] != 0:
                raise LookupError("tagged fields")
            self.pos += 1


def write_length(out: bytearray, n: int, flexible: bool, string: bool = False) -> None:
    """A length prefix (-1 = null): compact (N+1 as an unsigned varint), or int16 (strings) /
    int32 (arrays, bytes)."""
    if flexible:
        n += 1
        while n > 0x7F:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
    else:
        out += (_I16 if string else _I32).pack(n)
