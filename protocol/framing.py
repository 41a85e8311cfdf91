"""Kafka's size-prefixed framing, incrementally over a byte buffer (no sockets here).

Every request and response is `int32 size` + `size` bytes (Kafka protocol guide, "Common Request
and Response Structure"). `FrameDecoder.feed(data)` accepts any chunking of the stream (partial
frames, several frames in one read) and returns the complete frames so far.

Invariant: the decoder never buffers more than one size prefix beyond a frame it has accepted; a
size prefix above `max_frame_size` (Kafka's `socket.request.max.bytes`, 104857600 by default) or
below zero raises `FrameTooLarge` as soon as its 4 bytes arrive, before any body is kept, and the
decoder is then unusable (the connection must close).
"""

from __future__ import annotations

import struct

from protocol.errors import FrameTooLarge

DEFAULT_MAX_FRAME_SIZE = 104857600
_SIZE = struct.Struct(">i")


def encode_frame(payload: bytes) -> bytes:
    """Prefix `payload` with its int32 big-endian length."""
    return _SIZE.pack(len(payload)) + payload


class FrameDecoder:
    """Splits a byte stream into frames (the payloads, without their size prefixes).

    A frame that arrives in several reads is kept as the list of its pieces and joined once, when
    its last byte arrives: one copy of its bytes, however many reads it took (appending each read
    to one growing buffer copied the buffer again at each of its reallocations, which a TLS
    stream's 16 KiB records made a large share of a big request's cost)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._head = b""  # the first bytes of a size prefix not yet complete
        self._need: int | None = None  # body size of the frame being assembled
        self._parts: list[bytes | bytearray] = []  # its pieces so far
        self._have = 0  # their bytes
        self._failed: FrameTooLarge | None = None

    def _accept_size(self, size: int) -> None:
        if size < 0 or size > self.max_frame_size:
            self._failed = FrameTooLarge(size, self.max_frame_size)
            raise self._failed
        self._need = size

    def feed(self, data: bytes | bytearray) -> list[bytes | bytearray]:
        """Add received bytes; return the frames completed by them, in order (bytes or bytearray
        the caller owns: the decoder keeps no reference to a frame it returned). A frame that goes
        on in a later read keeps `data` (or its tail) as a piece, uncopied: the caller must not
        change `data` afterwards.

        Raises FrameTooLarge (and keeps raising it) once a size prefix is out of bounds.
        """
        if self._failed:
            raise self._failed
        frames: list[bytes | bytearray] = []
        pos, end = 0, len(data)
        while pos < end:
            need = self._need
            if need is None:
                if self._head or end - pos < 4:
                    take = min(4 - len(self._head), end - pos)
                    self._head += bytes(data[pos : pos + take])
                    pos += take
                    if len(self._head) < 4:
                        break
                    size = _SIZE.unpack(self._head)[0]
                    self._head = b""
                else:
                    size = _SIZE.unpack_from(data, pos)[0]
                    pos += 4
                self._accept_size(size)
                need = size
            missing = need - self._have
            if end - pos < missing:  # the frame goes on in a later read
                self._parts.append(data[pos:] if pos else data)
                self._have += end - pos
                break
            if self._parts:
                self._parts.append(data[pos : pos + missing])
                frames.append(bytearray().join(self._parts))
                self._parts, self._have = [], 0
            else:
                frames.append(data[pos : pos + missing])
            pos += missing
            self._need = None
        return frames

    @property
    def wanted(self) -> int:
        """Bytes still missing from the frame being assembled (or its size prefix): how much a
        reader may ask for next without reading past it."""
        if self._need is None:
            return 4 - len(self._head)
        return self._need - self._have

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._head) + self._have

    def at_frame_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for the peer to close)."""
        return self._need is None and not self._head
