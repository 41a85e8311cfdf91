"""The consumer protocol's embedded messages (Kafka's `ConsumerProtocolSubscription` v0-3 and
`ConsumerProtocolAssignment` v0-3, non-flexible): what consumers put in JoinGroup's protocol
metadata and SyncGroup's assignments. The broker only looks inside for the subscribed topics
(OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC, offset expiry) and for `describe`; clients (ours
included) build and read them.

Layout: int16 version; topics: int32 count of (int16-length string); user data: int32-length
nullable bytes; v1+ owned partitions: int32 count of (string topic, int32 count of int32);
v2+ int32 generation; v3+ int16-length nullable string rack. An assignment: int16 version,
int32 count of (string topic, int32 count of int32 partitions), nullable bytes user data.
"""

from __future__ import annotations

import struct

_H = struct.Struct(">h")
_I = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated consumer protocol message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return _H.unpack(self.take(2))[0]

    def int32(self) -> int:
        return _I.unpack(self.take(4))[0]

    def string(self) -> str:
        return self.take(self.int16()).decode("utf-8", "replace")

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.take(n)


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _H.pack(len(b)) + b


def _nullable_bytes(b: bytes | None) -> bytes:
    return _I.pack(-1) if b is None else _I.pack(len(b)) + b


def _topic_partitions(tps: dict[str, list[int]]) -> bytes:
    out = [_I.pack(len(tps))]
    for topic, parts in tps.items():
        out.append(_string(topic) + _I.pack(len(parts)) + b"".join(_I.pack(p) for p in parts))
    return b"".join(out)


def _read_topic_partitions(r: _Reader) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for _ in range(r.int32()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.int32() for _ in range(r.int32()))
    return out


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a subscription; None if it does not parse (not a consumer's metadata)."""
    try:
        r = _Reader(bytes(metadata))
        if r.int16() < 0:
            return None
        return {r.string() for _ in range(r.int32())}
    except (ValueError, struct.error):
        return None


def encode_subscription(
    topics: list[str],
    user_data: bytes | None = None,
    owned: dict[str, list[int]] | None = None,
    generation: int = -1,
    version: int = 1,
) -> bytes:
    """A `ConsumerProtocolSubscription` at `version` (0-2)."""
    out = _H.pack(version) + _I.pack(len(topics)) + b"".join(_string(t) for t in topics) + _nullable_bytes(user_data)
    if version >= 1:
        out += _topic_partitions(owned or {})
    if version >= 2:
        out += _I.pack(generation)
    return out


def decode_subscription(data: bytes) -> tuple[list[str], dict[str, list[int]]]:
    """(topics, owned partitions) of a subscription. Raises ValueError."""
    r = _Reader(bytes(data))
    version = r.int16()
    topics = [r.string() for _ in range(r.int32())]
    r.nullable_bytes()
    owned = _read_topic_partitions(r) if version >= 1 else {}
    return topics, owned


def encode_assignment(partitions: dict[str, list[int]], user_data: bytes | None = None, version: int = 1) -> bytes:
    return _H.pack(version) + _topic_partitions(partitions) + _nullable_bytes(user_data)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """The partitions of an assignment ({} for an empty one). Raises ValueError."""
    if not data:
        return {}
    r = _Reader(bytes(data))
    r.int16()
    return _read_topic_partitions(r)
