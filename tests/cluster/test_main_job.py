"""The main job (`minikafka run`, minikafka_cli/flights.py) on the first flights: cluster up, topic,
produce with a leader killed mid-stream, PySpark exactly-once check, cluster down; unchanged on a
SASL_SSL cluster with ACLs (`--security sasl_ssl`: TLS, SCRAM, the admin's client.properties for the
CLI and the `kafka.*` security options for Spark)."""

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

pytest.importorskip("pyspark", reason="make setup installs the spark extra")


@pytest.mark.parametrize("security,rows", [("plaintext", 20000), ("sasl_ssl", 5000)])
def test_main_job_on_a_slice_of_the_flights(tmp_path, security, rows):
    from test_cli_cluster import free_base_port

    base = free_base_port(3)
    zk_port = free_base_port(1)
    metrics = free_base_port(3)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "minikafka_cli.flights",
            "--rows",
            str(rows),
            "--security",
            security,
            "--dir",
            str(tmp_path / "run"),
            "--base-port",
            str(base),
            "--zookeeper-port",
            str(zk_port),
            "--metrics-base-port",
            str(metrics),
            "--kill-after-s",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = r.stdout
    assert r.returncode == 0, out[-3000:] + r.stderr[-2000:]
    assert "killed broker" in out and "started broker" in out
    assert "the Spark session for step 5 started meanwhile" in out  # overlapped with step 3, not after it
    assert f"{rows} records acknowledged" in out
    assert (
        f"check: {rows:,} rows acknowledged, {rows:,} read, {rows:,} distinct -> every acknowledged row read exactly once"
        in out
    )
    assert "RESULT: all checks passed" in out and "cluster down" in out
    assert "average departure delay per carrier" in out
    # rows per partition: only partitions that hold rows, adding up to every row
    counts = [int(n.replace(",", "")) for n in re.findall(r"^   partition \d+: ([\d,]+)$", out, re.M)]
    assert counts and all(counts) and sum(counts) == rows, counts
    # the Spark sink wrote each carrier's average, and the CLI consumer read exactly those back
    assert "per-carrier averages to flights-delays with the minikafka Spark sink" in out
    assert "read back -> the same" in out
