"""Hypothesis strategies derived from the schema objects themselves: a valid value for any
KStruct, Array or primitive in `protocol/types.py`, so every API and version gets generated
messages without hand-written fixtures."""

from __future__ import annotations

from construct import Flag, Float64b, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb
from hypothesis import strategies as st

from protocol import types as t

_INTS = {
    id(Int8sb): (-(1 << 7), (1 << 7) - 1),
    id(Int16sb): (-(1 << 15), (1 << 15) - 1),
    id(Int32sb): (-(1 << 31), (1 << 31) - 1),
    id(Int64sb): (-(1 << 63), (1 << 63) - 1),
    id(Int16ub): (0, (1 << 16) - 1),
    id(Int32ub): (0, (1 << 32) - 1),
}
_text = st.text(max_size=8)
_blob = st.binary(max_size=16)
_PRIMS = {
    "String": _text,
    "CompactString": _text,
    "NullableString": st.none() | _text,
    "CompactNullableString": st.none() | _text,
    "Bytes": _blob,
    "CompactBytes": _blob,
    "NullableBytes": st.none() | _blob,
    "CompactNullableBytes": st.none() | _blob,
    "Records": st.none() | _blob,
    "CompactRecords": st.none() | _blob,
    "Uuid": st.uuids(),
    "UnsignedVarInt": st.integers(0, (1 << 31) - 1),
}


def value_of(con) -> st.SearchStrategy:
    """A strategy of values that `con` can build."""
    if id(con) in _INTS:
        lo, hi = _INTS[id(con)]
        return st.integers(lo, hi)
    if con is Flag:
        return st.booleans()
    if con is Float64b:
        return st.floats(allow_nan=False)
    if isinstance(con, t.Array):
        items = st.lists(value_of(con.subcon), max_size=3)
        return st.none() | items if con.nullable else items
    if isinstance(con, t.NullableStruct):
        return st.none() | value_of(con.subcon)
    if isinstance(con, t.KStruct):
        required = {name: value_of(sub) for name, sub, _ in con.fields}
        optional = {name: value_of(sub) for _, name, sub, _ in con.tagged}
        return st.fixed_dictionaries(required, optional=optional)
    if isinstance(con, t._Prim):
        return _PRIMS[con.kname]
    raise TypeError(f"no strategy for {con!r}")


def assert_contains(expected, actual, path="") -> None:
    """Every key/value of `expected` is in `actual` (which may hold extra defaulted fields)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        for k, v in expected.items():
            assert k in actual, f"{path}.{k} missing"
            assert_contains(v, actual[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_contains(e, a, f"{path}[{i}]")
    else:
        assert expected == actual, f"{path}: {expected!r} != {actual!r}"
