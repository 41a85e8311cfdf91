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
    """Splits a byte stream into frames (the payloads, without their size prefixes)."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._need: int | None = None  # body size of the frame being assembled
        self._failed: FrameTooLarge | None = None

    def feed(self, data: bytes | bytearray) -> list[bytes | bytearray]:
        """Add received bytes; return the frames completed by them, in order (bytes, or the
        decoder's own bytearray handed over without a copy when it held exactly one frame; the
        caller owns it).

        Raises FrameTooLarge (and keeps raising it) once a size prefix is out of bounds.
        """
        if self._failed:
            raise self._failed
        self._buf += data
        frames: list[bytes | bytearray] = []
        while True:
            if self._need is None:
                if len(self._buf) < 4:
                    break
                size = _SIZE.unpack_from(self._buf)[0]
                if size < 0 or size > self.max_frame_size:
                    self._buf.clear()
                    self._failed = FrameTooLarge(size, self.max_frame_size)
                    raise self._failed
                del self._buf[:4]
                self._need = size
            if len(self._buf) < self._need:
                break
            if len(self._buf) == self._need:  # the buffer is exactly this frame: hand it over, no copy
                frames.append(self._buf)
                self._buf = bytearray()
            else:
                frames.append(bytes(self._buf[: self._need]))
                del self._buf[: self._need]
            self._need = None
        return frames

    @property
    def wanted(self) -> int:
        """Bytes still missing from the frame being assembled (or its size prefix): how much a
        reader may ask for next without reading past it."""
        if self._need is None:
            return 4 - len(self._buf) if len(self._buf) < 4 else 0
        return max(0, self._need - len(self._buf))

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._buf)

    def at_frame_boundary(self) -> bool:
        """True when no partial frame is pending (a clean place for the peer to close)."""
        return self._need is None and not self._buf
