"""Issue 49: the pytest plugin where users work. The project's wheel, installed into a fresh
virtualenv outside this repository (no checkout on its path), runs docs/testing.md's example test
file in two ways: on a ZooKeeper the user already runs (`--kafka-zookeeper`, with
ZOOKEEPER_HOME pointing at nothing, so no ZooKeeper could have been started), and on Debian's
zookeeper package found by itself. Neither run shows a warning raised in our code. The wheel holds
only the packages the broker, client, CLI, Spark connector and plugin need."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from readme_blocks import readme_block

from local_cluster.compose import wheel_build_lock
from local_cluster.zookeeper import ZooKeeperProcess

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
OURS = ("broker", "client", "client_metrics", "console", "controller", "coordinator", "local_cluster", "metrics")
OURS += ("minikafka", "minikafka_cli", "protocol", "security", "spark_connector", "storage", "zk")


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    r = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{command[:4]} exited {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A new virtualenv with the built wheel, pytest and the example's clients, and its environment."""
    root = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    with wheel_build_lock(ROOT):  # not beside the image build's wheel of the same tree (make test)
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(ROOT)], root, env)
    (wheel,) = (root / "dist").glob("minikafka-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist() if "/" in name}
    packages = {t for t in tops if not t.endswith((".dist-info", ".data"))}
    assert packages == set(OURS), sorted(packages ^ set(OURS))
    _run([sys.executable, "-m", "venv", str(root / "venv")], root, env)
    python = str(root / "venv" / "bin" / "python")
    _run(
        [python, "-m", "pip", "install", "-q", str(wheel), "pytest", "confluent-kafka", "kafka-python", "aiokafka"],
        root,
        env,
    )
    return root, {**env, "PATH": f"{root / 'venv' / 'bin'}:{env['PATH']}"}


def _example(root: Path, name: str) -> Path:
    app = root / name
    app.mkdir()
    (app / "test_orders.py").write_text(readme_block("testing:example"))
    return app


def _our_warnings(output: str) -> list[str]:
    """Lines of pytest's warnings summary that point into our installed packages."""
    summary = output.partition("warnings summary")[2]
    return [line for line in summary.splitlines() if re.search(rf"site-packages/({'|'.join(OURS)})/", line)]


def test_the_example_passes_from_the_wheel_on_a_running_zookeeper(fresh_venv, tmp_path):
    root, env = fresh_venv
    app = _example(root, "app-external-zookeeper")
    zookeeper = ZooKeeperProcess.start(tmp_path / "zookeeper")
    try:
        nowhere = {**env, "ZOOKEEPER_HOME": str(tmp_path / "no-zookeeper-here")}
        output = _run(
            ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--kafka-zookeeper={zookeeper.connect}"],
            app,
            nowhere,
        )
    finally:
        zookeeper.stop()
    assert "5 passed" in output, output
    assert _our_warnings(output) == [], output


def test_the_example_passes_from_the_wheel_with_debians_zookeeper(fresh_venv):
    root, env = fresh_venv
    app = _example(root, "app-debian-zookeeper")
    output = _run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"], app, env)
    assert "5 passed" in output, output
    assert _our_warnings(output) == [], output
