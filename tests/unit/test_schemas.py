"""Every served API and version round-trips; the generator is strict and its output is current."""

import json
import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import assert_contains, value_of

from protocol.api import SCHEMAS
from protocol.api_keys import ApiKey
from protocol.types import BufferReader
from tools import gen_schemas

CASES = [
    (s.name, v, kind)
    for s in SCHEMAS.values()
    for v in range(s.min_version, s.max_version + 1)
    for kind in ("request", "response")
]

# The ranges the issue asks the broker to serve (ApiVersions advertises exactly these).
REQUIRED = {
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
    "ApiVersions": (0, 3),
    "Metadata": (1, 12),
    "Produce": (3, 9),
    "Fetch": (4, 12),
    "ListOffsets": (1, 7),
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "FindCoordinator": (0, 5),
    "JoinGroup": (0, 9),
    "SyncGroup": (0, 5),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "OffsetCommit": (0, 9),
    "OffsetFetch": (0, 9),
    "ListGroups": (0, 5),
    "DescribeGroups": (0, 5),
    "InitProducerId": (0, 5),
    "OffsetForLeaderEpoch": (0, 4),
    "DescribeConfigs": (0, 4),
    "LeaderAndIsr": (2, 7),  # from the first version with a broker epoch (issue 34)
    "UpdateMetadata": (5, 8),  # from the first version with a broker epoch (issue 34)
    "StopReplica": (1, 4),  # from the first version with a broker epoch (issue 34)
    "ControlledShutdown": (2, 3),  # from the first version with a broker epoch (issue 34)
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
    "AddPartitionsToTxn": (0, 4),  # v4: the brokers' verify-only batches (KIP-890)
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
}


def test_served_ranges_cover_the_required_ones():
    served = {s.name: (s.min_version, s.max_version) for s in SCHEMAS.values()}
    assert served == REQUIRED


def _shape(name, version, kind):
    from protocol.schemas import APIS

    mod = next(m for m in APIS.values() if m.NAME == name)
    return (mod.REQUEST if kind == "request" else mod.RESPONSE)[version]


@pytest.mark.parametrize("name,version,kind", CASES)
def test_round_trip(name, version, kind):
    shape = _shape(name, version, kind)
    schema = next(s for s in SCHEMAS.values() if s.name == name)
    compiled = (schema.requests if kind == "request" else schema.responses)[version]

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value_of(shape))
    def check(value):
        wire = compiled.build(value)
        reader = BufferReader(wire)
        parsed = compiled.parse_stream(reader)
        assert reader.remaining() == 0
        assert_contains(value, parsed)
        assert compiled.build(parsed) == wire

    check()


def test_defaults_build_and_parse_for_every_version():
    for name, version, kind in CASES:
        schema = next(s for s in SCHEMAS.values() if s.name == name)
        compiled = (schema.requests if kind == "request" else schema.responses)[version]
        parsed = compiled.parse_stream(BufferReader(compiled.build({})))
        assert parsed == _shape(name, version, kind).default()


def test_regeneration_is_a_no_op():
    assert gen_schemas.DEFAULT_SPECS.is_dir(), f"Kafka specs expected at {gen_schemas.DEFAULT_SPECS}"
    assert gen_schemas.main(["--check"]) == 0


def _spec_dir_with(tmp_path, mutate):
    for p in gen_schemas.DEFAULT_SPECS.glob("*.json"):
        (tmp_path / p.name).write_text(p.read_text())
    spec = gen_schemas.load_spec(tmp_path / "ProduceRequest.json")
    mutate(spec)
    (tmp_path / "ProduceRequest.json").write_text(json.dumps(spec))
    return tmp_path


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda s: s.update(newSpecKey=1), "unknown spec keys"),
        (lambda s: s["fields"][1].update(fancy=True), "unknown field keys"),
        (lambda s: s["fields"][1].update(type="int128"), "type 'int128'"),
        (lambda s: s["fields"][1].update(versions="3~"), "version string"),
        (lambda s: s.update(validVersions="0-5"), "outside validVersions"),
    ],
)
def test_generator_refuses_what_it_does_not_understand(tmp_path, mutate, message):
    specs = _spec_dir_with(tmp_path, mutate)
    with pytest.raises(gen_schemas.SpecError, match=message):
        gen_schemas.Generator(specs).all_files()


def test_generated_code_copies_no_spec_prose():
    about = set()
    for p in gen_schemas.DEFAULT_SPECS.glob("*.json"):

        def walk(fields):
            for f in fields:
                if len(f.get("about", "")) > 25:
                    about.add(f["about"])
                walk(f.get("fields", []))

        walk(gen_schemas.load_spec(p).get("fields", []))
    text = "".join(p.read_text() for p in pathlib.Path(gen_schemas.DEFAULT_OUT).glob("*.py"))
    assert not [a for a in about if a in text]


def test_api_key_enum_matches_the_message_specs():
    expected: dict[str, int] = {}
    # Kafka 3.8's keys, then the newer specs' keys 3.8 does not have (KIP-932's share APIs)
    for directory in (gen_schemas.DEFAULT_SPECS, gen_schemas.DEFAULT_NEXT_SPECS):
        for path in directory.glob("*Request.json"):
            spec = json.loads(
                "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("//"))
            )
            api = spec["name"][: -len("Request")]
            name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", api).upper()
            if spec["apiKey"] not in expected.values():
                expected[name] = spec["apiKey"]
            elif api in gen_schemas.NEXT:  # served from the newer spec, under its newer name (74)
                expected = {k: v for k, v in expected.items() if v != spec["apiKey"]} | {name: spec["apiKey"]}
    assert {key.name: key.value for key in ApiKey} == expected
    for key, schema in SCHEMAS.items():  # the served schemas carry the same names
        assert ApiKey(key).name == re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", schema.name).upper()
