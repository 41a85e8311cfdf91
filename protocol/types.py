"""Kafka's primitive wire types as `construct` constructs that compile.

Source: Kafka protocol guide ("Protocol Primitive Types") and the message-spec conventions of
`clients/src/main/resources/common/message/README.md` (Kafka 3.8): nullable and compact
(flexible-version) encodings, UUIDs, tagged fields (KIP-482).

Invariants kept here:
- Decoding reads from a `BufferReader`; every short read, bad length or bad varint raises
  `MalformedMessage` (never `IndexError` or `struct.error`).
- Strings decode as Java's `new String(bytes, UTF_8)` does in Kafka's readers: a byte sequence that
  is not UTF-8 becomes U+FFFD instead of failing the request (a topic name holding one is then
  refused by the topic-name rules, as in Kafka).
- No decode allocates more than the input holds: array counts are checked against the bytes left.
- `records` fields decode to a `memoryview` into the frame (zero copy); record batches stay opaque.
- Decoded structs are `FieldDict`s (a dict with attribute access). A field the version lacks is
  filled with its default, so readers need not branch on version; building such a field with a
  non-default value raises `FieldNotInVersion` unless the spec marks it ignorable.
- Unknown tagged fields are kept under `_unknown_tagged_fields` ({tag: bytes}) and written back.

Every construct here implements only the compiled path (`_emitparse`/`_emitbuild`); calling
`.parse()`/`.build()` on an uncompiled one compiles it once on first use.
"""

from __future__ import annotations

import io as _io
import struct
import uuid
from operator import itemgetter
from typing import Any

from construct import Construct, Flag, Float64b, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb
from construct.core import FormatField

from protocol.errors import FieldNotInVersion, MalformedMessage

__all__ = [
    "BufferReader",
    "FieldDict",
    "Int8sb",
    "Int16sb",
    "Int16ub",
    "Int32sb",
    "Int32ub",
    "Int64sb",
    "Float64b",
    "Boolean",
    "UnsignedVarInt",
    "String",
    "NullableString",
    "CompactString",
    "CompactNullableString",
    "Bytes",
    "NullableBytes",
    "CompactBytes",
    "CompactNullableBytes",
    "Records",
    "CompactRecords",
    "Uuid",
    "NullableStruct",
    "Array",
    "KStruct",
    "ZERO_UUID",
]

ZERO_UUID = uuid.UUID(int=0)
_MISSING = object()


class MissingField(KeyError, AttributeError):
    """A field a decoded struct does not hold: a KeyError to `struct["name"]`, an AttributeError
    to `struct.name` (so `getattr(struct, "name", default)` and `hasattr` work as on any object)."""


class FieldDict(dict):
    """A decoded struct: a dict whose keys are also attributes (`req.topic_data`).

    The first attribute read of a field name installs a class-level property that reads the key
    with `operator.itemgetter` (C): later reads of that name cost a dict lookup (about 40 ns)
    instead of a failed attribute lookup and a Python `__getattr__` call (about 400 ns; a
    one-record Produce and its two follower fetches read some 30 fields, issue 48). A missing key
    raises MissingField either way."""

    __slots__ = ()

    def __missing__(self, name: str) -> Any:
        raise MissingField(name)

    def __getattr__(self, name: str) -> Any:
        value = self[name]  # MissingField (an AttributeError) when absent
        if not name.startswith("_") and name not in _INSTALLED:  # only names dict and FieldDict lack reach here
            _INSTALLED.add(name)
            setattr(FieldDict, name, property(itemgetter(name)))
        return value

    __setattr__ = dict.__setitem__


_INSTALLED: set[str] = set()


class BufferReader:
    """A read cursor over bytes, bytearray or memoryview, the stream every decode uses.

    `read(n)` returns a bytes copy; `read_view(n)` a zero-copy memoryview. Reading past the end
    raises `MalformedMessage`.
    """

    __slots__ = ("_buf", "_view", "_pos", "_end", "_is_bytes")

    def __init__(self, data, pos: int = 0, end: int | None = None):
        self._is_bytes = isinstance(data, bytes)
        self._view = memoryview(data).cast("B") if not self._is_bytes else memoryview(data)
        self._buf = data if self._is_bytes else self._view
        self._pos = pos
        self._end = len(self._view) if end is None else end

    def _advance(self, n: int) -> int:
        pos = self._pos
        if n < 0 or pos + n > self._end:
            raise MalformedMessage(f"need {n} bytes at position {pos}, have {self._end - pos}")
        self._pos = pos + n
        return pos

    def read(self, n: int) -> bytes:
        pos = self._advance(n)
        data = self._buf[pos : pos + n]
        return data if isinstance(data, bytes) else bytes(data)

    def read_view(self, n: int) -> memoryview:
        pos = self._advance(n)
        return self._view[pos : pos + n]

    def sub(self, n: int) -> BufferReader:
        """A reader over the next `n` bytes (consumed from this one)."""
        pos = self._advance(n)
        return BufferReader(self._view, pos, pos + n)

    def read_uvarint(self) -> int:
        """Unsigned LEB128 varint of at most 5 bytes (a uint32), as Kafka's lengths use."""
        buf, pos, end = self._view, self._pos, self._end
        result = shift = 0
        while True:
            if pos >= end:
                raise MalformedMessage("truncated varint")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise MalformedMessage("unsigned varint longer than 5 bytes")
        self._pos = pos
        return result

    def remaining(self) -> int:
        return self._end - self._pos

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else (self._pos + pos if whence == 1 else self._end + pos)
        return self._pos


_ONE_BYTE = [bytes((i,)) for i in range(128)]


def write_uvarint(io, value: int) -> None:
    """Write an unsigned LEB128 varint (Kafka UNSIGNED_VARINT)."""
    if 0 <= value < 128:  # lengths, counts and empty tag sections: nearly every varint written
        io.write(_ONE_BYTE[value])
        return
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    io.write(out)


_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")


def _read_len(io, compact: bool, nullable: bool, what: str) -> int:
    """Read a length prefix; -1 means null. Compact lengths are stored as N+1 (0 = null); plain
    ones as int16 for strings and int32 for bytes and arrays."""
    if compact:
        n = io.read_uvarint() - 1
    elif what == "string":
        n = _i16.unpack(io.read(2))[0]
    else:
        n = _i32.unpack(io.read(4))[0]
    if n < -1 or (n == -1 and not nullable):
        raise MalformedMessage(f"invalid {what} length {n}")
    return n


def _write_len(io, n: int, compact: bool, what: str) -> None:
    if compact:
        write_uvarint(io, n + 1)
    else:
        io.write((_i16 if what == "string" else _i32).pack(n))


def _write_null(io, compact: bool, nullable: bool, what: str) -> None:
    """Write the null marker (-1, or 0 when compact); ValueError if the field is not nullable."""
    if not nullable:
        raise ValueError(f"null in a non-nullable {what} field")
    _write_len(io, -1, compact, what)


class _Emitted(Construct):
    """Base for constructs that exist only compiled: `.parse()`/`.build()` compile on first use."""

    def _compiled_self(self):
        compiled = self.__dict__.get("_compiled_cache")
        if compiled is None:
            compiled = self.compile()
            self.__dict__["_compiled_cache"] = compiled
        return compiled

    def _parse(self, stream, context, path):
        if not isinstance(stream, BufferReader):
            stream = BufferReader(stream.read())
        return self._compiled_self()._parse(stream, context, path)

    def _build(self, obj, stream, context, path):
        return self._compiled_self()._build(obj, stream, context, path)

    @staticmethod
    def _import(code) -> None:
        code.append(
            "from protocol.types import _rt, FieldDict, _MISSING, _check_absent, _read_tags, _write_tags, "
            "write_uvarint\n"
            "from protocol.errors import MalformedMessage\nfrom uuid import UUID"
        )


class _Runtime:
    """Functions the compiled code calls (one instance, `_rt`)."""

    @staticmethod
    def read_string(io, compact: bool, nullable: bool):
        n = _read_len(io, compact, nullable, "string")
        if n < 0:
            return None
        return io.read(n).decode("utf-8", "replace")

    @staticmethod
    def write_string(obj, io, compact: bool, nullable: bool):
        if obj is None:
            _write_null(io, compact, nullable, "string")
            return obj
        data = obj.encode("utf-8")
        if not compact and len(data) > 0x7FFF:
            raise ValueError("string longer than 32767 bytes")
        _write_len(io, len(data), compact, "string")
        io.write(data)
        return obj

    @staticmethod
    def read_bytes(io, compact: bool, nullable: bool, zero_copy: bool):
        n = _read_len(io, compact, nullable, "bytes")
        if n < 0:
            return None
        return io.read_view(n) if zero_copy else io.read(n)

    @staticmethod
    def write_bytes(obj, io, compact: bool, nullable: bool):
        if obj is None:
            _write_null(io, compact, nullable, "bytes")
            return obj
        _write_len(io, len(obj), compact, "bytes")
        io.write(obj)
        return obj

    @staticmethod
    def read_count(io, compact: bool, nullable: bool) -> int:
        n = _read_len(io, compact, nullable, "array")
        if n > io.remaining():
            raise MalformedMessage(f"array of {n} elements in {io.remaining()} bytes")
        return n

    @staticmethod
    def write_count(obj, io, compact: bool, nullable: bool) -> bool:
        """Write an array's count; returns False when the array is null."""
        if obj is None:
            _write_null(io, compact, nullable, "array")
            return False
        _write_len(io, len(obj), compact, "array")
        return True

    @staticmethod
    def read_uuid(io):
        return uuid.UUID(bytes=io.read(16))

    @staticmethod
    def write_uuid(obj, io):
        io.write(obj.bytes)
        return obj


_rt = _Runtime()


def _check_absent(objdict, absent) -> None:
    """Raise FieldNotInVersion if a non-ignorable field absent from this version is non-default."""
    for name, make_default, ignorable in absent:
        if not ignorable and name in objdict:
            value, default = objdict[name], make_default()
            if value != default:
                raise FieldNotInVersion(f"field {name!r} is not in this version (value {value!r})")


def _read_tags(io, result, parsers) -> None:
    """Read a tagged-field section (KIP-482) into `result`; unknown tags are kept as bytes."""
    for _ in range(io.read_uvarint()):
        tag = io.read_uvarint()
        sub = io.sub(io.read_uvarint())
        entry = parsers.get(tag)
        if entry is None:
            result.setdefault("_unknown_tagged_fields", {})[tag] = sub.read(sub.remaining())
            continue
        name, parse = entry
        result[name] = parse(sub, None)
        if sub.remaining():
            raise MalformedMessage(f"tagged field {tag} has {sub.remaining()} trailing bytes")


def _write_tags(objdict, io, builders) -> None:
    """Write the tagged-field section: known fields whose value differs from the default, plus
    unknown tags carried from a decode, in ascending tag order."""
    if not builders and "_unknown_tagged_fields" not in objdict:
        io.write(_ONE_BYTE[0])  # most structs: no tagged field at all
        return
    fields: dict[int, bytes] = dict(objdict.get("_unknown_tagged_fields") or {})
    for tag, (name, make_default, build) in builders.items():
        value = objdict.get(name, _MISSING)
        if value is not _MISSING and value != make_default():
            buf = _io.BytesIO()
            build(value, buf, None)
            fields[tag] = buf.getvalue()
    write_uvarint(io, len(fields))
    for tag in sorted(fields):
        write_uvarint(io, tag)
        write_uvarint(io, len(fields[tag]))
        io.write(fields[tag])


class _Prim(_Emitted):
    """A string/bytes/uuid/varint primitive: one runtime function call each way."""

    def __init__(self, name: str, parse_expr: str, build_expr: str, zero):
        super().__init__()
        self.kname, self._pexpr, self._bexpr, self.zero = name, parse_expr, build_expr, zero

    def _emitparse(self, code):
        self._import(code)
        return self._pexpr

    def _emitbuild(self, code):
        self._import(code)
        return self._bexpr

    def __repr__(self):
        return self.kname


def _string(compact: bool, nullable: bool, name: str) -> _Prim:
    return _Prim(
        name,
        f"_rt.read_string(io, {compact}, {nullable})",
        f"_rt.write_string(obj, io, {compact}, {nullable})",
        None if nullable else "",
    )


def _bytes(compact: bool, nullable: bool, name: str, zero_copy: bool = False) -> _Prim:
    return _Prim(
        name,
        f"_rt.read_bytes(io, {compact}, {nullable}, {zero_copy})",
        f"_rt.write_bytes(obj, io, {compact}, {nullable})",
        None if nullable else b"",
    )


Boolean = Flag
String = _string(False, False, "String")
NullableString = _string(False, True, "NullableString")
CompactString = _string(True, False, "CompactString")
CompactNullableString = _string(True, True, "CompactNullableString")
Bytes = _bytes(False, False, "Bytes")
NullableBytes = _bytes(False, True, "NullableBytes")
CompactBytes = _bytes(True, False, "CompactBytes")
CompactNullableBytes = _bytes(True, True, "CompactNullableBytes")
#: Kafka `records`: nullable bytes holding record batches, decoded as a zero-copy memoryview.
Records = _bytes(False, True, "Records", zero_copy=True)
CompactRecords = _bytes(True, True, "CompactRecords", zero_copy=True)
Uuid = _Prim("Uuid", "_rt.read_uuid(io)", "_rt.write_uuid(obj, io)", ZERO_UUID)
UnsignedVarInt = _Prim("UnsignedVarInt", "io.read_uvarint()", "(write_uvarint(io, obj), obj)[1]", 0)


class Array(_Emitted):
    """Kafka ARRAY (int32 count, -1 = null) or COMPACT_ARRAY (uvarint count+1, 0 = null)."""

    def __init__(self, subcon, compact: bool = False, nullable: bool = False):
        super().__init__()
        self.subcon, self.compact, self.nullable = subcon, compact, nullable

    def _emitparse(self, code):
        self._import(code)
        fname = f"parse_array_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                n = _rt.read_count(io, {self.compact}, {self.nullable})
                if n < 0:
                    return None
                return [{self.subcon._compileparse(code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        self._import(code)
        fname = f"build_array_{code.allocateId()}"
        code.append(f"""
            def {fname}(items, io, this):
                if _rt.write_count(items, io, {self.compact}, {self.nullable}):
                    for obj in items:
                        {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"

    def __repr__(self):
        return f"Array({self.subcon!r}, compact={self.compact}, nullable={self.nullable})"


class NullableStruct(_Emitted):
    """A nullable struct field: an int8 marker (-1 null, 1 present) and then the struct (Kafka's
    generated code for `"nullableVersions"` on a struct type, e.g. ConsumerGroupHeartbeat's
    Assignment)."""

    def __init__(self, subcon):
        super().__init__()
        self.subcon = subcon

    def _emitparse(self, code):
        self._import(code)
        fname = f"parse_nullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(io, this):
                marker = io.read(1)
                if marker == b"\\xff":
                    return None
                if marker != b"\\x01":
                    raise MalformedMessage(f"nullable struct marker {{marker!r}}")
                return {self.subcon._compileparse(code)}
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        self._import(code)
        fname = f"build_nullable_{code.allocateId()}"
        code.append(f"""
            def {fname}(obj, io, this):
                if obj is None:
                    io.write(b"\\xff")
                    return obj
                io.write(b"\\x01")
                return {self.subcon._compilebuild(code)}
        """)
        return f"{fname}(obj, io, this)"

    def __repr__(self):
        return f"NullableStruct({self.subcon!r})"


class KStruct(_Emitted):
    """A Kafka struct at one version.

    fields: (name, subcon, default) in wire order.
    absent: (name, default, ignorable) for the spec's fields this version lacks; decoded as the
        default, checked on build (FieldNotInVersion).
    tagged: (tag, name, subcon, default); only with flexible=True.
    flexible: the version is a flexible one (KIP-482): a tagged-field section ends the struct.
    """

    def __init__(self, *fields, absent=(), tagged=(), flexible: bool = False):
        super().__init__()
        self.fields = tuple(fields)
        self.absent = tuple(absent)
        self.tagged = tuple(tagged)
        self.flexible = flexible
        if self.tagged and not flexible:
            raise ValueError("tagged fields need a flexible version")

    def default(self) -> FieldDict:
        """A value of this struct with every field at its default (Kafka's defaults)."""
        out = FieldDict()
        for name, _sub, default in self.fields:
            out[name] = _fresh(default)
        for name, default, _ in self.absent:
            out[name] = _fresh(default)
        for _, name, _sub, default in self.tagged:
            out[name] = _fresh(default)
        return out

    def _default_expr(self, code, default) -> str:
        if isinstance(default, KStruct):
            code.linkedinstances[id(default)] = default
            return f"linkedinstances[{id(default)}].default()"
        return repr(default)

    def _runs(self) -> list[list[tuple]]:
        """The fields in wire order, grouped: each run of two or more consecutive fixed-size
        numbers (construct `FormatField`s) is one group, read or written with one struct call
        (fewer calls per message: a Produce response's partition is one pack instead of five)."""
        groups: list[list[tuple]] = []
        for field in self.fields:
            fixed = type(field[1]) is FormatField
            if fixed and groups and type(groups[-1][-1][1]) is FormatField:
                groups[-1].append(field)
            else:
                groups.append([field])
        return groups

    @staticmethod
    def _fused(code, uid: int, k: int, run: list[tuple]) -> tuple[str, int]:
        fmt = ">" + "".join(sub.fmtstr.lstrip("<>=!") for _, sub, _ in run)
        code.append(f"fused_{uid}_{k} = struct.Struct({fmt!r})")
        return f"fused_{uid}_{k}", struct.calcsize(fmt)

    def _emitparse(self, code):
        self._import(code)
        uid = code.allocateId()
        fname = f"parse_kstruct_{uid}"
        lines = [f"def {fname}(io, this):", "    result = FieldDict()"]
        for k, run in enumerate(self._runs()):
            if len(run) > 1:
                fused, size = self._fused(code, uid, k, run)
                targets = ", ".join(f"result[{name!r}]" for name, _, _ in run)
                lines.append(f"    {targets} = {fused}.unpack(io.read({size}))")
                continue
            name, sub, _ = run[0]
            lines.append(f"    result[{name!r}] = {sub._compileparse(code)}")
        for name, default, _ in self.absent:
            lines.append(f"    result[{name!r}] = {self._default_expr(code, default)}")
        if self.flexible:
            table = []
            for tag, name, sub, default in self.tagged:
                lines.append(f"    result[{name!r}] = {self._default_expr(code, default)}")
                tname = f"parse_tag_{uid}_{tag}"
                code.append(f"def {tname}(io, this):\n    return {sub._compileparse(code)}")
                table.append(f"{tag}: ({name!r}, {tname})")
            code.append(f"tags_{uid} = {{{', '.join(table)}}}")
            lines.append(f"    _read_tags(io, result, tags_{uid})")
        lines.append("    return result")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        self._import(code)
        uid = code.allocateId()
        fname = f"build_kstruct_{uid}"
        lines = [f"def {fname}(objdict, io, this):"]
        for k, run in enumerate(self._runs()):
            if len(run) > 1:
                fused, _ = self._fused(code, uid, k, run)
                for i, (name, _, default) in enumerate(run):
                    lines.append(f"    v{i} = objdict.get({name!r}, _MISSING)")
                    lines.append(f"    if v{i} is _MISSING: v{i} = {self._default_expr(code, default)}")
                lines.append(f"    io.write({fused}.pack({', '.join(f'v{i}' for i in range(len(run)))}))")
                continue
            name, sub, default = run[0]
            lines.append(f"    obj = objdict.get({name!r}, _MISSING)")
            lines.append(f"    if obj is _MISSING: obj = {self._default_expr(code, default)}")
            lines.append(f"    {sub._compilebuild(code)}")
        if self.absent:
            entries = ", ".join(
                f"({name!r}, lambda: {self._default_expr(code, default)}, {ignorable})"
                for name, default, ignorable in self.absent
            )
            code.append(f"absent_{uid} = ({entries},)")
            lines.append(f"    _check_absent(objdict, absent_{uid})")
        if self.flexible:
            table = []
            for tag, name, sub, default in self.tagged:
                tname = f"build_tag_{uid}_{tag}"
                code.append(f"def {tname}(obj, io, this):\n    return {sub._compilebuild(code)}")
                table.append(f"{tag}: ({name!r}, lambda: {self._default_expr(code, default)}, {tname})")
            code.append(f"tags_{uid} = {{{', '.join(table)}}}")
            lines.append(f"    _write_tags(objdict, io, tags_{uid})")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"

    def __repr__(self):
        return f"KStruct({', '.join(n for n, _, _ in self.fields)})"


def _fresh(default):
    if isinstance(default, KStruct):
        return default.default()
    if isinstance(default, list):
        return list(default)
    return default
