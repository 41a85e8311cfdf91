"""The docker-compose cluster (`docker-compose.yml`: a 3-node ZooKeeper ensemble and brokers 1-3) driven from Python:
build its images without a registry, bring it up and wait until every container is healthy, act
on one container (the nemeses: kill, SIGTERM, pause, network disconnect), take it down.

Images (`build_images`): the base `minikafka-base:bookworm` (docker/build-base.sh, debootstrap;
reused when present), the project and its dependencies as wheels built on the host into
docker/wheels/, then `minikafka:<version>` (Dockerfile) and `minikafka-zookeeper:<version>`
(docker/zookeeper/) built with no network. Works with `docker compose` (v2) or `docker-compose` (v1,
which has no `up --wait`: `ComposeCluster.wait_healthy` polls the containers' health instead).

Errors: `DockerError` (with the command's output) when a docker command fails or a container
does not become healthy in time.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = importlib.metadata.version("minikafka")
BASE_IMAGE = os.environ.get("MINIKAFKA_BASE_IMAGE", "minikafka-base:bookworm")  # Python, no JRE
ZK_BASE_IMAGE = os.environ.get("MINIKAFKA_ZK_BASE_IMAGE", "minikafka-base-zookeeper:bookworm")
BROKERS = ("broker1", "broker2", "broker3")
ZOOKEEPERS = ("zookeeper1", "zookeeper2", "zookeeper3")  # one ensemble (a quorum is any two)
PROJECT = "minikafka"  # the project name .env gives docker-compose in the repository
DEFAULT_PORTS = (19092, 19093, 19094)  # the EXTERNAL listeners' host ports
DEFAULT_METRICS_PORTS = (19404, 19405, 19406)  # the brokers' Prometheus endpoints on the host
#: held by `build_images` from start to end: the image tags belong to the Docker engine, not to a
#: checkout, so one lock per machine (`make test` builds in the background while tests wait on it)
IMAGES_LOCK = Path(tempfile.gettempdir()) / "minikafka-images.lock"


class DockerError(RuntimeError):
    pass


def _run(cmd: list[str], *, cwd: Path = ROOT, env: dict | None = None, timeout: float = 1800) -> str:
    """Run a command; its stdout, or DockerError with the tail of its output."""
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise DockerError(f"{' '.join(cmd)} exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    return r.stdout


def docker_unavailable() -> str | None:
    """None when a Docker engine answers, else why not (for a test's skip message)."""
    if shutil.which("docker") is None:
        return "no docker command on this machine"
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"no Docker engine answers: {(r.stderr or r.stdout).strip()[:300]}"
    if not compose_command():
        return "neither `docker compose` nor `docker-compose` is installed"
    return None


@functools.cache
def compose_command() -> tuple[str, ...]:
    """`docker compose` when the plugin is installed, else `docker-compose`; () when neither is."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ("docker", "compose")
    if shutil.which("docker-compose"):
        return ("docker-compose",)
    return ()


def image_exists(name: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", name], capture_output=True).returncode == 0


def remove_setuptools_build(root: Path) -> list[Path]:
    """Remove what setuptools left in `root/build` (lib, bdist.*, temp.*) so a wheel holds no
    stale modules; the directories removed. Everything else under build/ (the console test's
    screenshots, written by the other pytest tier meanwhile) is kept."""
    build = root / "build"
    stale = [p for pattern in ("lib", "lib.*", "bdist.*", "temp.*") for p in build.glob(pattern) if p.is_dir()]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive flock(2) on `path` (created if missing), waiting for any other holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def images_building() -> bool:
    """True while some process holds `IMAGES_LOCK`, i.e. is inside `build_images` (the test
    scheduler hands the Docker tests out once it is free)."""
    try:
        f = open(IMAGES_LOCK, "a")
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def wheel_build_lock(root: Path = ROOT) -> contextlib.AbstractContextManager[None]:
    """Held around a `pip wheel` of `root`: setuptools builds in `root/build/` (in-tree), so two at
    once (the image build and tests/cluster/test_wheel_install.py) would remove each other's files."""
    return _exclusive(root / "build" / ".wheel-build.lock")


def build_images(log=print) -> dict[str, float]:
    """Build (or reuse) the base image, the wheels and both images; seconds per step. One build at
    a time per machine: a call waits while another holds `IMAGES_LOCK` (`make test` starts one in
    the background), then reuses the base images that one made."""
    with _exclusive(IMAGES_LOCK):
        return _build_images(log)


def _build_images(log) -> dict[str, float]:
    timings = {}
    started = time.monotonic()
    _run(["bash", str(ROOT / "docker" / "build-base.sh")], timeout=3600)
    timings["base image (debootstrap, reused when present)"] = time.monotonic() - started
    log(f"base image {BASE_IMAGE}: ready in {timings['base image (debootstrap, reused when present)']:.0f} s")

    started = time.monotonic()
    wheels = ROOT / "docker" / "wheels"
    # fixed timestamps in the wheels: the same sources give the same bytes, so docker build reuses its cache
    env = {
        **os.environ,
        "PATH": f"{Path.home() / '.cargo' / 'bin'}:{os.environ.get('PATH', '')}",
        "SOURCE_DATE_EPOCH": "315532800",
    }
    with wheel_build_lock():
        shutil.rmtree(wheels, ignore_errors=True)
        remove_setuptools_build(ROOT)
        _run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(wheels), ".", "./native"], env=env)
    timings["wheels (pip wheel on the host)"] = time.monotonic() - started
    log(
        f"wheels: {len(list(wheels.glob('*.whl')))} in docker/wheels ({timings['wheels (pip wheel on the host)']:.0f} s)"
    )

    started = time.monotonic()
    _run(["docker", "build", "-q", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", f"minikafka:{VERSION}", "."])
    zk_base = ["--build-arg", f"BASE_IMAGE={ZK_BASE_IMAGE}"]
    _run(["docker", "build", "-q", *zk_base, "-t", f"minikafka-zookeeper:{VERSION}", "docker/zookeeper"])
    timings["images (docker build, offline)"] = time.monotonic() - started
    log(
        f"images minikafka:{VERSION}, minikafka-zookeeper:{VERSION}: built ({timings['images (docker build, offline)']:.0f} s)"
    )
    return timings


@dataclass
class ComposeCluster:
    """One compose project of docker-compose.yml. `ports`: the host ports of brokers 1-3's EXTERNAL
    listeners (published and advertised)."""

    project: str = PROJECT
    ports: tuple[int, int, int] = DEFAULT_PORTS
    host: str = "127.0.0.1"
    overrides: tuple[Path, ...] = ()  # compose files read after docker-compose.yml (compose_security.py)
    metrics_ports: tuple[int, int, int] = DEFAULT_METRICS_PORTS
    _ids: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.ports)

    @property
    def metrics_urls(self) -> list[str]:
        return [f"http://{self.host}:{p}/metrics" for p in self.metrics_ports]

    def env(self) -> dict[str, str]:
        ports = {f"MINIKAFKA_PORT_{i}": str(p) for i, p in enumerate(self.ports, 1)}
        ports |= {f"MINIKAFKA_METRICS_PORT_{i}": str(p) for i, p in enumerate(self.metrics_ports, 1)}
        return {**os.environ, **ports, "MINIKAFKA_HOST": self.host, "MINIKAFKA_VERSION": VERSION}

    def compose(self, *args: str, timeout: float = 600) -> str:
        files = [arg for path in (ROOT / "docker-compose.yml", *self.overrides) for arg in ("-f", str(path))]
        cmd = [*compose_command(), "-p", self.project, *files, *args]
        return _run(cmd, env=self.env(), timeout=timeout)

    def up(self, timeout: float = 240) -> float:
        """`up -d`, then wait until every service is healthy; seconds it took."""
        started = time.monotonic()
        self.compose("up", "-d", timeout=timeout)
        self.wait_healthy((*ZOOKEEPERS, *BROKERS), timeout)
        return time.monotonic() - started

    def container(self, service: str) -> str:
        if service not in self._ids:
            ids = self.compose("ps", "-q", service).split()
            if not ids:
                raise DockerError(f"no container for service {service} in project {self.project}")
            self._ids[service] = ids[0]
        return self._ids[service]

    def inspect(self, service: str) -> dict:
        return json.loads(_run(["docker", "inspect", self.container(service)]))[0]

    def health(self, service: str) -> str:
        """'healthy', 'starting', 'unhealthy', or the container's state when it has no health."""
        state = self.inspect(service)["State"]
        if not state.get("Running") or state.get("Paused"):
            return state["Status"]  # exited, paused: its last health no longer says anything
        return state.get("Health", {}).get("Status") or state["Status"]

    def health_reason(self, service: str) -> str:
        """The last healthcheck's output (why a container is unhealthy, or what it checked), or ""."""
        log = self.inspect(service)["State"].get("Health", {}).get("Log") or []
        return log[-1].get("Output", "").strip() if log else ""

    def wait_healthy(self, services, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        pending = list(services)
        while pending:
            pending = [s for s in pending if self.health(s) != "healthy"]
            if pending and time.monotonic() > deadline:
                logs = {
                    s: f"healthcheck: {self.health_reason(s)}\n"
                    + _run(["docker", "logs", "--tail", "30", self.container(s)])
                    for s in pending
                }
                raise DockerError(f"not healthy after {timeout:.0f} s: {pending}\n{logs}")
            if pending:
                time.sleep(1)

    def docker(self, verb: str, service: str, *args: str) -> None:
        """`docker <verb> <args> <container>`: kill, stop, start, pause, unpause."""
        _run(["docker", verb, *args, self.container(service)])

    def network(self) -> str:
        return f"{self.project}_minikafka"

    def disconnect(self, service: str) -> None:
        """Cut the container off the compose network: the other brokers, ZooKeeper and (through its
        published port) the host no longer reach it, nor it them."""
        _run(["docker", "network", "disconnect", self.network(), self.container(service)])

    def connect(self, service: str) -> None:
        _run(["docker", "network", "connect", "--alias", service, self.network(), self.container(service)])

    def down(self) -> None:
        """Remove the containers, the network and the volumes."""
        self.compose("down", "-v", "--remove-orphans", "-t", "20")
        self._ids.clear()

    def running(self) -> list[str]:
        return self.compose("ps", "-q").split()
