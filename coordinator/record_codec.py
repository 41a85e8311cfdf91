"""What the coordinators' internal records share (Kafka's `MessageUtil.toVersionPrefixedBytes` and
the placement of a key on an internal topic): a record key or value is an int16 version followed by
the struct of that version (`protocol/schemas/coordinator_records.py`); a coordinator's key (group
id, transactional id) lives on partition `Utils.abs(key.hashCode) % partitions` of its topic.
"""

from __future__ import annotations

import io
import struct

from protocol.errors import MalformedMessage
from protocol.types import BufferReader

VERSION_PREFIX = struct.Struct(">h")


class CorruptCoordinatorRecord(ValueError):
    """An internal topic's record a coordinator cannot read (unknown version, truncated)."""


_COMPILED: dict[int, object] = {}


def _compiled(schema):
    found = _COMPILED.get(id(schema))
    if found is None:
        found = _COMPILED[id(schema)] = schema.compile()
    return found


def parse_versioned(maps: dict, data: bytes, what: str):
    """(version, struct) of a version-prefixed record; `maps`: version -> schema. Raises
    CorruptCoordinatorRecord naming `what`."""
    if data is None or len(data) < 2:
        raise CorruptCoordinatorRecord(f"{what}: {len(data or b'')} bytes, too short for a version")
    (version,) = VERSION_PREFIX.unpack_from(data)
    schema = maps.get(version)
    if schema is None:
        raise CorruptCoordinatorRecord(f"{what}: unknown version {version}")
    reader = BufferReader(data, 2)
    try:
        value = _compiled(schema).parsefunc(reader, None)
    except (MalformedMessage, struct.error, ValueError) as e:
        raise CorruptCoordinatorRecord(f"{what} v{version}: {e}") from None
    return version, value


def build_versioned(maps: dict, version: int, value: dict) -> bytes:
    """`value` as version-prefixed bytes of schema `maps[version]`."""
    out = io.BytesIO()
    out.write(VERSION_PREFIX.pack(version))
    _compiled(maps[version]).buildfunc(value, out, None)
    return out.getvalue()


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode` (UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_key(key: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(key.hashCode) % num_partitions` (`Utils.abs(Integer.MIN_VALUE)` is 0,
    not an overflow)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
