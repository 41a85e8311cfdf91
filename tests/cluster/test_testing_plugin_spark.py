"""docs/testing.md's Spark example for minikafka.testing runs under a fresh pytest (issue 38)."""

from __future__ import annotations

import pytest
from readme_blocks import readme_block
from test_testing_plugin import _no_processes_within, _pytest

pytestmark = pytest.mark.slow


def test_the_readme_spark_example_passes(tmp_path):
    pytest.importorskip("pyspark", reason="make setup installs the spark extra")
    (tmp_path / "test_spark_job.py").write_text(readme_block("testing:spark"))
    run = _pytest(tmp_path, "test_spark_job.py")
    out, _ = run.communicate(timeout=600)
    assert run.returncode == 0 and "1 passed" in out, out
    assert _no_processes_within(tmp_path) == []
