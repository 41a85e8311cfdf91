"""`make bench`, docker-compose part (issue 21's timings, issue 38's image sizes; the issues name no
targets, these are ours):

1. both base images built from nothing (docker/build-base.sh, debootstrap from Debian's archive,
   under throw-away tags so the images in use stay), skipped with --quick;
2. a rebuild with everything cached: wheels on the host, then both `docker build`s;
3. the images' sizes: the broker's (no JRE), the same broker built on a base that also holds
   ZooKeeper and the JRE (the layout before issue 38; skipped with --quick), and ZooKeeper's;
4. `compose up` to every container healthy (3 ZooKeeper nodes, 3 brokers), on free host ports;
   then `compose down -v`.

Results: a markdown table (measured vs target) printed, written to `bench/results/compose.md` and
(unless --quick) copied into docs/benchmarks.md between the `bench:compose` markers. Needs a Docker engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import targets
from local_cluster import compose
from local_cluster.ports import free_port


def _build_base(env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run(
        ["bash", str(compose.ROOT / "docker" / "build-base.sh")],
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return time.monotonic() - started


def _cold_base_build() -> float:
    tags = {
        "MINIKAFKA_BASE_IMAGE": "minikafka-base:bench-cold",
        "MINIKAFKA_ZK_BASE_IMAGE": "minikafka-base-zk:bench-cold",
    }
    subprocess.run(["docker", "rmi", "-f", *tags.values()], capture_output=True)
    seconds = _build_base(tags)
    subprocess.run(["docker", "rmi", "-f", *tags.values()], capture_output=True)
    return seconds


def _size_mb(image: str) -> float:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Size}}", image], capture_output=True, text=True)
    return int(out.stdout.strip()) / 1e6


def _broker_with_jre_mb() -> float:
    """The broker image built as before issue 38: on a base holding Python, ZooKeeper and the JRE."""
    base, image = "minikafka-base:bench-with-jre", f"minikafka:{compose.VERSION}-with-jre"
    packages = "python3,python3-venv,zookeeper,default-jre-headless,netcat-openbsd,ca-certificates"
    _build_base({"MINIKAFKA_BASE_IMAGE": base, "MINIKAFKA_BROKER_PACKAGES": packages})
    subprocess.run(
        ["docker", "build", "-q", "--build-arg", f"BASE_IMAGE={base}", "-t", image, "."],
        cwd=compose.ROOT,
        check=True,
        capture_output=True,
    )
    size = _size_mb(image)
    subprocess.run(["docker", "rmi", "-f", image, base], capture_output=True)
    return size


def run(quick: bool) -> list[targets.Row]:
    reason = compose.docker_unavailable()
    if reason:
        raise SystemExit(f"compose bench: {reason}")
    rows: list[targets.Row] = []
    if not quick:
        cold = _cold_base_build()
        rows.append(
            ("both base images from nothing (debootstrap + docker import)", f"{cold:.0f} s", "< 300 s", cold < 300)
        )
    compose.build_images(log=lambda line: print(line, file=sys.stderr))  # the images exist from here on
    timings = compose.build_images(log=lambda line: None)
    cached = sum(timings.values())
    detail = ", ".join(f"{k.split(' (')[0]} {v:.1f} s" for k, v in timings.items())
    rows.append((f"rebuild with everything cached ({detail})", f"{cached:.1f} s", "< 30 s", cached < 30))
    broker_mb, zookeeper_mb = (
        _size_mb(f"minikafka:{compose.VERSION}"),
        _size_mb(f"minikafka-zookeeper:{compose.VERSION}"),
    )
    rows.append(
        (
            "broker image minikafka:" + compose.VERSION + " (Python, no JRE)",
            f"{broker_mb:.0f} MB",
            "< 300 MB",
            broker_mb < 300,
        )
    )
    if not quick:
        before = _broker_with_jre_mb()
        rows.append(
            (
                "the same broker image on a base with ZooKeeper and the JRE (before issue 38)",
                f"{before:.0f} MB ({before / broker_mb:.1f}x)",
                "-",
                None,
            )
        )
    rows.append(
        ("ZooKeeper image minikafka-zookeeper:" + compose.VERSION + " (JRE)", f"{zookeeper_mb:.0f} MB", "-", None)
    )
    cluster = compose.ComposeCluster(
        f"minikafka-bench-{os.getpid()}",
        (free_port(), free_port(), free_port()),
        metrics_ports=(free_port(), free_port(), free_port()),
    )
    try:
        up = cluster.up()
    finally:
        started = time.monotonic()
        cluster.down()
        down = time.monotonic() - started
    rows.append(("compose up: 3 ZooKeeper nodes + 3 brokers healthy", f"{up:.1f} s", "< 60 s", up < 60))
    rows.append(("compose down -v", f"{down:.1f} s", "< 30 s", down < 30))
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, "21, 38", "compose")


if __name__ == "__main__":
    raise SystemExit(main())
