"""Requests generated from Kafka's message specs (our compiled schemas, `protocol.schemas`), for
the broker's fuzz target (issue 34: "handlers never raise on a request that parsed").

`RequestGenerator(seed).request()` returns (api_key, version, body): a served API and version
chosen uniformly, and a body that encodes at that version, with every field drawn from boundary
values: integers at 0, ±1, their type's extremes and a few small ones; strings empty, short,
names of real topics and groups, path-like, at the protocol's 32,767-byte limit; nullable fields
null; arrays empty, of one, of a few, or null; records empty, garbage, or a valid batch; UUIDs
zero or random. The choice is deterministic for a seed (random.Random).
"""

from __future__ import annotations

import random
import uuid

from construct import Flag, Float64b, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb

from protocol import record_batch as rb
from protocol.api import SCHEMAS
from protocol.schemas import APIS
from protocol.types import ZERO_UUID, Array, FieldDict, KStruct, _Prim

_INT_RANGES = {
    id(Int8sb): (-(2**7), 2**7 - 1),
    id(Int16sb): (-(2**15), 2**15 - 1),
    id(Int16ub): (0, 2**16 - 1),
    id(Int32sb): (-(2**31), 2**31 - 1),
    id(Int32ub): (0, 2**32 - 1),
    id(Int64sb): (-(2**63), 2**63 - 1),
}

NAMES = ["fuzz", "fuzz-1", "__consumer_offsets", "__transaction_state", "", "../x", "a/b", "x" * 249, "ü" * 10]


class RequestGenerator:
    def __init__(self, seed: int, apis: list[int] | None = None):
        self.rng = random.Random(seed)
        self.apis = sorted(apis if apis is not None else SCHEMAS)
        self._valid_batch = bytes(rb.build_batch([(b"k", b"v")] * 3))

    def request(self) -> tuple[int, int, FieldDict]:
        api_key = self.rng.choice(self.apis)
        schema = SCHEMAS[api_key]
        version = self.rng.randint(schema.min_version, schema.max_version)
        return api_key, version, self.value(APIS[api_key].REQUEST[version], depth=0)

    def client_id(self) -> str | None:
        """The request header's client id (nullable, at most 32,767 bytes)."""
        return self.rng.choice(("fuzz", "fuzz", "fuzz", "", None, "z" * 32767))

    def value(self, sub, depth: int):
        rng = self.rng
        if isinstance(sub, KStruct):
            out = FieldDict()
            for name, field_sub, _default in sub.fields:
                out[name] = self.value(field_sub, depth + 1)
            for _tag, name, field_sub, _default in sub.tagged:
                if rng.random() < 0.2:
                    out[name] = self.value(field_sub, depth + 1)
            return out
        if isinstance(sub, Array):
            if sub.nullable and rng.random() < 0.15:
                return None
            n = rng.choice((0, 1, 1, 2, 3)) if depth < 4 else rng.choice((0, 1))
            return [self.value(sub.subcon, depth + 1) for _ in range(n)]
        if isinstance(sub, _Prim):
            return self._prim(sub)
        if sub is Flag:
            return rng.random() < 0.5
        if sub is Float64b:
            return rng.choice((0.0, -1.0, 1e308, 0.5))
        bounds = _INT_RANGES.get(id(sub))
        if bounds is not None:
            low, high = bounds
            return rng.choice((0, 0, 1, -1 if low < 0 else 1, 2, 3, 5, 100, low, high, high - 1, 1000, 30000))
        raise TypeError(f"no generator for {sub!r}")

    def _prim(self, sub: _Prim):
        rng = self.rng
        kind = sub.kname
        if "Nullable" in kind or kind.endswith("Records"):
            if rng.random() < 0.2:
                return None
        if kind.endswith("String"):
            return rng.choice(NAMES + ["y" * 32767 if "Compact" not in kind else "y" * 5000])
        if kind.endswith("Records"):
            return rng.choice(
                (b"", self._valid_batch, bytes(rng.randrange(256) for _ in range(70)), self._valid_batch[:-3])
            )
        if kind.endswith("Bytes"):
            return rng.choice((b"", b"\x00", bytes(rng.randrange(256) for _ in range(rng.choice((1, 16, 300))))))
        if kind == "Uuid":
            return ZERO_UUID if rng.random() < 0.5 else uuid.UUID(int=rng.getrandbits(128))
        if kind == "UnsignedVarInt":
            return rng.choice((0, 1, 2**31 - 1, 2**32 - 1))
        raise TypeError(f"no generator for {kind}")
