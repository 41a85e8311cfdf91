"""Generate `protocol/schemas/*.py` from Kafka's JSON message specs.

Usage: `python -m tools.gen_schemas [--specs DIR] [--out DIR] [--check]`

Input: Kafka 3.8's `*Request.json` / `*Response.json` (by default `../shared/kafka-message-specs`,
or `$MINIKAFKA_SPECS`), and the record specs of the coordinators' internal topics (`../shared/
kafka-record-specs`). Output: one readable module per served API holding a `KStruct` per distinct
shape of each version, `headers.py`, `coordinator_records.py` (the keys and values written to
`__consumer_offsets` and `__transaction_state`) and the registry `__init__.py`. `--check` writes nothing
and exits 1 if the checked-in modules differ from what would be generated.

The generator is strict: a spec key, field key, type or version string it does not understand is
a `SpecError`, never silently skipped. No "about" text from the specs reaches the output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SPECS = ROOT.parent / "shared" / "kafka-message-specs"
DEFAULT_RECORD_SPECS = ROOT.parent / "shared" / "kafka-record-specs"
#: newer specs than 3.8's for the APIs in NEXT (KIP-848's, as the newest clients send them)
DEFAULT_NEXT_SPECS = ROOT.parent / "shared" / "kafka-message-specs-next"
NEXT = {
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
    # KIP-932's share groups: Kafka 4.2's stable versions, which librdkafka 2.16 sends
    "ShareGroupHeartbeat",
    "ShareGroupDescribe",
    "ShareFetch",
    "ShareAcknowledge",
    # KIP-932's share coordinator, asked by the partition leaders (and the group coordinator)
    "InitializeShareGroupState",
    "ReadShareGroupState",
    "WriteShareGroupState",
    "DeleteShareGroupState",
    "ReadShareGroupStateSummary",
    # KIP-932's share group admin
    "DescribeShareGroupOffsets",
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
    # KIP-714's client metrics (v0 of 74 is 3.8's ListClientMetricsResources; v1 lists every type)
    "ListConfigResources",
}
DEFAULT_OUT = ROOT / "protocol" / "schemas"

#: API name -> (min, max) versions served; the broker advertises exactly these in ApiVersions.
SERVED: dict[str, tuple[int, int]] = {
    "Produce": (3, 9),
    "Fetch": (4, 12),
    "ListOffsets": (1, 7),
    "Metadata": (1, 12),
    # the controller's requests and ControlledShutdown from their first version with a broker
    # epoch (KIP-380): older ones let any client that reaches a listener act as the controller
    # (issue 34); Kafka's own brokers never send them
    "LeaderAndIsr": (2, 7),
    "StopReplica": (1, 4),
    "UpdateMetadata": (5, 8),
    "ControlledShutdown": (2, 3),
    "OffsetCommit": (0, 9),
    "OffsetFetch": (0, 9),
    "FindCoordinator": (0, 5),
    "JoinGroup": (0, 9),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "SyncGroup": (0, 5),
    "DescribeGroups": (0, 5),
    "ListGroups": (0, 5),
    "ApiVersions": (0, 3),
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "InitProducerId": (0, 5),
    "OffsetForLeaderEpoch": (0, 4),
    "DescribeConfigs": (0, 4),
    "ElectLeaders": (0, 2),
    "DeleteGroups": (0, 2),
    "OffsetDelete": (0, 0),
    "AlterConfigs": (0, 2),
    "IncrementalAlterConfigs": (0, 1),
    "CreatePartitions": (0, 3),
    "DeleteRecords": (0, 2),
    "DescribeLogDirs": (0, 4),
    "AlterPartitionReassignments": (0, 0),
    "ListPartitionReassignments": (0, 0),
    "AddPartitionsToTxn": (0, 4),
    "AddOffsetsToTxn": (0, 4),
    "EndTxn": (0, 4),
    "WriteTxnMarkers": (0, 1),
    "TxnOffsetCommit": (0, 4),
    "DescribeProducers": (0, 0),
    "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 1),
    "SaslHandshake": (0, 1),
    "SaslAuthenticate": (0, 2),
    "CreateAcls": (0, 3),
    "DescribeAcls": (0, 3),
    "DeleteAcls": (0, 3),
    "AlterUserScramCredentials": (0, 0),
    "DescribeUserScramCredentials": (0, 0),
    "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    "ConsumerGroupHeartbeat": (0, 1),
    "ConsumerGroupDescribe": (0, 0),
    "ShareGroupHeartbeat": (1, 1),
    "ShareGroupDescribe": (1, 1),
    "ShareFetch": (1, 1),
    "ShareAcknowledge": (1, 1),
    "InitializeShareGroupState": (0, 0),
    "ReadShareGroupState": (0, 0),
    "WriteShareGroupState": (0, 1),
    "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 1),
    "DescribeShareGroupOffsets": (0, 1),
    "AlterShareGroupOffsets": (0, 0),
    "DeleteShareGroupOffsets": (0, 0),
    "GetTelemetrySubscriptions": (0, 0),
    "PushTelemetry": (0, 0),
    "ListConfigResources": (0, 1),
}
HEADERS = {"RequestHeader": (0, 2), "ResponseHeader": (0, 1)}
#: record spec name -> versions generated (all Kafka 3.8 writes or may have written)
RECORDS: dict[str, tuple[int, int]] = {
    "OffsetCommitKey": (0, 1),
    "OffsetCommitValue": (0, 4),
    "GroupMetadataKey": (2, 2),
    "GroupMetadataValue": (0, 4),
    "TransactionLogKey": (0, 0),
    "TransactionLogValue": (0, 1),
    # KIP-848's consumer groups (record key versions 3-8)
    "ConsumerGroupMetadataKey": (3, 3),
    "ConsumerGroupMetadataValue": (0, 0),
    "ConsumerGroupPartitionMetadataKey": (4, 4),
    "ConsumerGroupPartitionMetadataValue": (0, 0),
    "ConsumerGroupMemberMetadataKey": (5, 5),
    "ConsumerGroupMemberMetadataValue": (0, 0),
    "ConsumerGroupTargetAssignmentMetadataKey": (6, 6),
    "ConsumerGroupTargetAssignmentMetadataValue": (0, 0),
    "ConsumerGroupTargetAssignmentMemberKey": (7, 7),
    "ConsumerGroupTargetAssignmentMemberValue": (0, 0),
    "ConsumerGroupCurrentMemberAssignmentKey": (8, 8),
    "ConsumerGroupCurrentMemberAssignmentValue": (0, 0),
    # KIP-932's share groups (Kafka 4's coordinator records: the key's version is its record type)
    "ShareGroupMemberMetadataKey": (0, 0),
    "ShareGroupMemberMetadataValue": (0, 0),
    "ShareGroupMetadataKey": (0, 0),
    "ShareGroupMetadataValue": (0, 0),
    "ShareGroupTargetAssignmentMetadataKey": (0, 0),
    "ShareGroupTargetAssignmentMetadataValue": (0, 0),
    "ShareGroupTargetAssignmentMemberKey": (0, 0),
    "ShareGroupTargetAssignmentMemberValue": (0, 0),
    "ShareGroupCurrentMemberAssignmentKey": (0, 0),
    "ShareGroupCurrentMemberAssignmentValue": (0, 0),
    "ShareGroupStatePartitionMetadataKey": (0, 0),
    "ShareGroupStatePartitionMetadataValue": (0, 0),
    # KIP-932's share coordinator (`__share_group_state`: key version 0 snapshot, 1 update)
    "ShareSnapshotKey": (0, 0),
    "ShareSnapshotValue": (0, 0),
    "ShareUpdateKey": (0, 0),
    "ShareUpdateValue": (0, 0),
}

SPEC_KEYS = {
    "apiKey",
    "type",
    "name",
    "validVersions",
    "flexibleVersions",
    "fields",
    "listeners",
    "deprecatedVersions",
    "commonStructs",
    "latestVersionUnstable",
}
FIELD_KEYS = {
    "name",
    "type",
    "versions",
    "about",
    "ignorable",
    "default",
    "entityType",
    "fields",
    "nullableVersions",
    "mapKey",
    "tag",
    "taggedVersions",
    "zeroCopy",
    "flexibleVersions",
}
INTS = {
    "int8": "Int8sb",
    "int16": "Int16sb",
    "int32": "Int32sb",
    "int64": "Int64sb",
    "uint16": "Int16ub",
    "uint32": "Int32ub",
}
SIMPLE = {**INTS, "bool": "Boolean", "float64": "Float64b", "uuid": "Uuid"}
INF = 1 << 30


class SpecError(Exception):
    """A spec uses something this generator does not understand."""


def load_spec(path: Path) -> dict:
    """Kafka's specs are JSON with `//` line comments."""
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)
    return json.loads(text)


def parse_versions(text: str | None, where: str) -> tuple[int, int] | None:
    """'3+', '0-7', '5', 'none' -> (lo, hi) inclusive, or None for 'none'."""
    if text is None or text == "none":
        return None
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text)
    if not m:
        raise SpecError(f"{where}: version string {text!r}")
    lo = int(m.group(1))
    hi = INF if m.group(2) == "+" else int(m.group(3)) if m.group(3) else lo
    return lo, hi


def within(v: int, rng: tuple[int, int] | None) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def snake(name: str) -> str:
    """Kafka field name -> snake_case: `LeaderEpoch` -> `leader_epoch`, `IsKRaftController` ->
    `is_kraft_controller` (KRaft is one word)."""
    name = name.replace("KRaft", "Kraft")
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass
class Ctx:
    spec_name: str
    prefix: str  # "Req" / "Resp" for nested struct names
    flexible: tuple[int, int] | None
    common: dict[str, list]
    defs: dict[str, str]  # rendered text -> variable name (dedupe)
    order: list[tuple[str, str]]  # (variable name, text) in definition order
    versions_of: dict[str, list[int]]


class Generator:
    def __init__(
        self,
        specs_dir: Path,
        record_specs_dir: Path = DEFAULT_RECORD_SPECS,
        next_specs_dir: Path = DEFAULT_NEXT_SPECS,
    ):
        self.specs_dir = specs_dir
        self.record_specs_dir = record_specs_dir
        self.next_specs_dir = next_specs_dir

    # ---- rendering one struct at one version -------------------------------------------------
    def struct_var(self, ctx: Ctx, type_name: str, fields: list, v: int) -> str:
        body = self.struct_body(ctx, fields, v, f"{ctx.spec_name}.{type_name}")
        base = f"_{ctx.prefix}{type_name}"
        return self.define(ctx, base, body, v)

    def define(self, ctx: Ctx, base: str, body: str, v: int) -> str:
        key = f"{base}\0{body}"
        name = ctx.defs.get(key)
        if name is None:
            name = f"{base}__{len([k for k in ctx.defs if k.startswith(base + chr(0))])}"
            ctx.defs[key] = name
            ctx.order.append((name, body))
        ctx.versions_of.setdefault(name, []).append(v)
        return name

    def struct_body(self, ctx: Ctx, fields: list, v: int, where: str) -> str:
        flex = within(v, ctx.flexible)
        present, absent, tagged = [], [], []
        for f in fields:
            fw = f"{where}.{f.get('name')}"
            unknown = set(f) - FIELD_KEYS
            if unknown:
                raise SpecError(f"{fw}: unknown field keys {sorted(unknown)}")
            versions = parse_versions(f["versions"], fw)
            tag = f.get("tag")
            tagged_versions = parse_versions(f.get("taggedVersions"), fw)
            if (tag is None) != (tagged_versions is None):
                raise SpecError(f"{fw}: tag and taggedVersions must come together")
            name = snake(f["name"])
            if not within(v, versions):
                absent.append(
                    f"({name!r}, {self.default(ctx, f, v, fw, present=False)}, {bool(f.get('ignorable', False))})"
                )
                continue
            if tag is not None and within(v, tagged_versions):
                if not flex:
                    raise SpecError(f"{fw}: tagged in a non-flexible version {v}")
                sub = self.type_expr(ctx, f, v, fw)
                tagged.append(f"({tag}, {name!r}, {sub}, {self.default(ctx, f, v, fw)})")
                continue
            sub = self.type_expr(ctx, f, v, fw)
            present.append(f"({name!r}, {sub}, {self.default(ctx, f, v, fw)})")
        parts = [f"    {p}," for p in present]
        if absent:
            parts.append("    absent=(" + "".join(f"\n        {a}," for a in absent) + "\n    ),")
        if tagged:
            parts.append("    tagged=(" + "".join(f"\n        {t}," for t in tagged) + "\n    ),")
        if flex:
            parts.append("    flexible=True,")
        return "KStruct(\n" + "\n".join(parts) + "\n)"

    def struct_fields(self, ctx: Ctx, f: dict, type_name: str, fw: str) -> list:
        if "fields" in f:
            return f["fields"]
        if type_name in ctx.common:
            return ctx.common[type_name]
        raise SpecError(f"{fw}: struct type {type_name!r} has no fields and is not a common struct")

    def compact(self, ctx: Ctx, f: dict, v: int, fw: str) -> bool:
        own = f.get("flexibleVersions")
        return within(v, parse_versions(own, fw) if own is not None else ctx.flexible)

    def type_expr(self, ctx: Ctx, f: dict, v: int, fw: str) -> str:
        t = f["type"]
        nullable = within(v, parse_versions(f.get("nullableVersions"), fw))
        compact = self.compact(ctx, f, v, fw)
        cpre = "Compact" if compact else ""
        if t.startswith("[]"):
            inner = t[2:]
            if inner in SIMPLE:
                sub = SIMPLE[inner]
            elif inner == "string":
                sub = f"{cpre}String"
            elif inner[:1].isupper():
                sub = self.struct_var(ctx, inner, self.struct_fields(ctx, f, inner, fw), v)
            else:
                raise SpecError(f"{fw}: array element type {inner!r}")
            return f"Array({sub}, compact={compact}, nullable={nullable})"
        if "fields" in f and not t[:1].isupper():
            raise SpecError(f"{fw}: fields given on non-struct type {t!r}")
        if t in SIMPLE:
            if nullable:
                raise SpecError(f"{fw}: nullable {t}")
            return SIMPLE[t]
        if t in ("string", "bytes", "records"):
            kind = {"string": "String", "bytes": "Bytes", "records": "Records"}[t]
            if t == "records":
                return f"{cpre}Records"
            return f"{cpre}{'Nullable' if nullable else ''}{kind}"
        if t[:1].isupper():
            struct = self.struct_var(ctx, t, self.struct_fields(ctx, f, t, fw), v)
            return f"NullableStruct({struct})" if nullable else struct
        raise SpecError(f"{fw}: type {t!r}")

    def default(self, ctx: Ctx, f: dict, v: int, fw: str, present: bool = True) -> str:
        t, d = f["type"], f.get("default")
        nullable = within(v, parse_versions(f.get("nullableVersions"), fw))
        if t.startswith("[]"):
            if d not in (None, "null"):
                raise SpecError(f"{fw}: array default {d!r}")
            return "None" if d == "null" and nullable else "[]"
        if t in INTS:
            return "0" if d is None else str(int(str(d), 0))
        if t == "bool":
            if d not in (None, "true", "false", True, False):
                raise SpecError(f"{fw}: bool default {d!r}")
            return "True" if d in ("true", True) else "False"
        if t == "float64":
            return repr(float(d or 0))
        if t == "uuid":
            if d is not None:
                raise SpecError(f"{fw}: uuid default {d!r}")
            return "ZERO_UUID"
        if t == "string":
            if d == "null":
                return "None" if nullable or not present else '""'
            return repr(d or "")
        if t in ("bytes", "records"):
            if d not in (None, "null"):
                raise SpecError(f"{fw}: bytes default {d!r}")
            return "None" if (t == "records" or d == "null") and (nullable or not present) else 'b""'
        if t[:1].isupper():
            if nullable and d in (None, "null"):
                return "None"
            if d is not None:
                raise SpecError(f"{fw}: struct default {d!r}")
            # A field absent from v defaults to the struct's defaults at its first version.
            first = v if present else parse_versions(f["versions"], fw)[0]
            return self.struct_var(ctx, t, self.struct_fields(ctx, f, t, fw), first)
        raise SpecError(f"{fw}: default for type {t!r}")

    # ---- one message spec over the served versions -------------------------------------------
    def message(self, spec: dict, prefix: str, top: str, served: tuple[int, int], out: list) -> dict[int, str]:
        where = spec.get("name", "?")
        unknown = set(spec) - SPEC_KEYS
        if unknown:
            raise SpecError(f"{where}: unknown spec keys {sorted(unknown)}")
        valid = parse_versions(spec["validVersions"], where)
        if not (valid and valid[0] <= served[0] and served[1] <= valid[1]):
            raise SpecError(f"{where}: served {served} outside validVersions {spec['validVersions']}")
        common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
        ctx = Ctx(where, prefix, parse_versions(spec["flexibleVersions"], where), common, {}, [], {})
        by_version = {}
        for v in range(served[0], served[1] + 1):
            body = self.struct_body(ctx, spec["fields"], v, where)
            by_version[v] = self.define(ctx, top, body, v)
        for name, body in ctx.order:
            vs = ctx.versions_of[name]
            final = f"{name.split('__')[0]}_V{vs[0]}" + (f"_V{vs[-1]}" if vs[-1] != vs[0] else "")
            out.append((name, final, body))
        return by_version

    def module(self, api: str, served: tuple[int, int]) -> str:
        directory = self.next_specs_dir if api in NEXT else self.specs_dir
        req = load_spec(directory / f"{api}Request.json")
        resp = load_spec(directory / f"{api}Response.json")
        if req["apiKey"] != resp["apiKey"] or req["type"] != "request" or resp["type"] != "response":
            raise SpecError(f"{api}: request/response specs disagree")
        defs: list = []
        req_map = self.message(req, "Req", "REQUEST", served, defs)
        resp_map = self.message(resp, "Resp", "RESPONSE", served, defs)
        flex = parse_versions(req["flexibleVersions"], api)
        return self.render(
            f"{api} (API key {req['apiKey']}), versions {served[0]}-{served[1]}: request and response schemas.",
            ("Kafka trunk's (2024-10, kafka-message-specs-next) " if api in NEXT else "Kafka 3.8's ")
            + f"{api}Request.json and {api}Response.json",
            [
                f"API_KEY = {req['apiKey']}",
                f"NAME = {api!r}",
                f"VERSIONS = {served!r}",
                f"FLEXIBLE_FROM = {flex[0] if flex else None!r}",
            ],
            defs,
            {"REQUEST": req_map, "RESPONSE": resp_map},
        )

    def headers_module(self) -> str:
        return self.standalone_module(
            self.specs_dir,
            HEADERS,
            "header",
            lambda n: ("REQUEST_HEADER" if n == "RequestHeader" else "RESPONSE_HEADER", n[:-6]),
            "Request header v0-2 and response header v0-1.",
            "Kafka 3.8's RequestHeader.json and ResponseHeader.json",
        )

    def records_module(self) -> str:
        return self.standalone_module(
            self.record_specs_dir,
            RECORDS,
            "data",
            lambda n: (snake(n).upper(), n),
            "Records of the coordinators' internal topics: keys and values by version.",
            "Kafka 3.8's " + " and ".join(f"{n}.json" for n in RECORDS) + " (record specs)",
        )

    def standalone_module(self, directory: Path, served: dict, kind: str, names, title: str, source: str) -> str:
        """One module of structs that are no API's (headers, records): `names(spec name)` gives
        (the map's name, the prefix of nested struct names)."""
        defs: list = []
        maps = {}
        for spec_name, versions in served.items():
            spec = load_spec(directory / f"{spec_name}.json")
            if spec["type"] != kind and not (
                kind == "data" and spec["type"] in ("coordinator-key", "coordinator-value")
            ):
                raise SpecError(f"{spec_name}: type {spec['type']!r}")
            spec["apiKey"] = -1
            top, prefix = names(spec_name)
            maps[top] = self.message(spec, prefix, top, versions, defs)
        return self.render(title, source, [], defs, maps)

    @staticmethod
    def render(title: str, source: str, consts: list[str], defs: list, maps: dict) -> str:
        rename = {name: final for name, final, _ in defs}
        pattern = re.compile("|".join(re.escape(n) for n in sorted(rename, key=len, reverse=True)))
        lines = [
            '"""' + title,
            "",
            f"Generated by tools/gen_schemas.py from {source}.",
            "Do not edit: run `make regen`. Each KStruct is one wire shape; the maps give the shape of",
            'each served version."""',
            "",
            "from protocol.types import *  # noqa: F403",
            "",
        ]
        lines += consts + ([""] if consts else [])
        for _name, final, body in defs:
            lines += ["", f"{final} = {pattern.sub(lambda m: rename[m.group(0)], body)}"]
        for top, mapping in maps.items():
            lines += ["", f"{top} = {{"] + [f"    {v}: {rename[n]}," for v, n in mapping.items()] + ["}"]
        return "\n".join(lines) + "\n"

    def registry(self) -> str:
        mods = sorted(SERVED, key=lambda a: snake(a))
        lines = [
            '"""The served APIs, by API key: each module holds REQUEST/RESPONSE maps of version -> KStruct.',
            "",
            'Generated by tools/gen_schemas.py. Do not edit: run `make regen`."""',
            "",
            "from protocol.schemas import headers  # noqa: F401",
        ]
        lines += [f"from protocol.schemas import {snake(a)}" for a in mods]
        lines += ["", "APIS = {"] + [f"    {snake(a)}.API_KEY: {snake(a)}," for a in mods] + ["}"]
        return "\n".join(lines) + "\n"

    def all_files(self) -> dict[str, str]:
        files = {f"{snake(api)}.py": self.module(api, served) for api, served in SERVED.items()}
        files["headers.py"] = self.headers_module()
        files["coordinator_records.py"] = self.records_module()
        files["__init__.py"] = self.registry()
        return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", type=Path, default=Path(os.environ.get("MINIKAFKA_SPECS", DEFAULT_SPECS)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail if the checked-in modules are stale")
    args = parser.parse_args(argv)
    if not args.specs.is_dir():
        print(f"gen_schemas: spec directory {args.specs} not found", file=sys.stderr)
        return 2
    try:
        files = Generator(args.specs).all_files()
    except SpecError as e:
        print(f"gen_schemas: {e}", file=sys.stderr)
        return 2
    stale = [n for n, text in files.items() if not (args.out / n).exists() or (args.out / n).read_text() != text]
    if args.check:
        for n in stale:
            print(f"gen_schemas: {args.out / n} is stale", file=sys.stderr)
        return 1 if stale else 0
    for n in stale:
        (args.out / n).write_text(files[n])
    print(f"gen_schemas: {len(files)} modules, {len(stale)} rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
