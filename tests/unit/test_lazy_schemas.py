"""protocol.api compiles each (API, version) schema on first use, not at import: every served
version still compiles, versions that share a shape share one compiled form, and a new process
that imports the CLI compiles nothing (its start does not pay for ~0.45 s of compiling)."""

import subprocess
import sys

import pytest
from construct import Compiled

from protocol.api import SCHEMAS


def test_every_served_version_of_every_api_compiles_on_first_use():
    for schema in SCHEMAS.values():
        for version in range(schema.min_version, schema.max_version + 1):
            for compiled in (schema.requests, schema.responses):
                assert isinstance(compiled[version], Compiled), (schema.name, version)
                assert compiled[version] is compiled[version]  # compiled once, then cached


def test_a_version_the_api_does_not_have_is_a_key_error():
    schema = SCHEMAS[0]
    with pytest.raises(KeyError):
        schema.requests[schema.max_version + 100]


def test_importing_the_cli_compiles_no_schema():
    code = "import minikafka_cli.main, protocol.api as a; print(len(a._COMPILED))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
