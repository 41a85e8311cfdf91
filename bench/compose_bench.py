"""`make bench`, docker-compose part (issue 21's timings; the issue names no targets, these are ours):

1. the base image built from nothing (docker/build-base.sh, debootstrap from Debian's archive, under
   a throw-away tag so the images in use stay), skipped with --quick;
2. a rebuild with everything cached: wheels on the host, then both `docker build`s;
3. `compose up` to every container healthy, on free host ports; then `compose down -v`.

Results: a markdown table (measured vs target) printed, written to `bench/results/compose.md` and
(unless --quick) copied into README.md between the `bench:compose` markers. Needs a Docker engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import targets
from local_cluster import compose
from local_cluster.zookeeper import free_port


def _cold_base_build() -> float:
    tag = "minikafka-base:bench-cold"
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    started = time.monotonic()
    subprocess.run(
        ["bash", str(compose.ROOT / "docker" / "build-base.sh")],
        env={**os.environ, "MINIKAFKA_BASE_IMAGE": tag},
        check=True,
        capture_output=True,
    )
    seconds = time.monotonic() - started
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
    return seconds


def run(quick: bool) -> list[targets.Row]:
    reason = compose.docker_unavailable()
    if reason:
        raise SystemExit(f"compose bench: {reason}")
    rows: list[targets.Row] = []
    if not quick:
        cold = _cold_base_build()
        rows.append(("base image from nothing (debootstrap + docker import)", f"{cold:.0f} s", "< 300 s", cold < 300))
    compose.build_images(log=lambda line: print(line, file=sys.stderr))  # the images exist from here on
    timings = compose.build_images(log=lambda line: None)
    cached = sum(timings.values())
    detail = ", ".join(f"{k.split(' (')[0]} {v:.1f} s" for k, v in timings.items())
    rows.append((f"rebuild with everything cached ({detail})", f"{cached:.1f} s", "< 30 s", cached < 30))
    cluster = compose.ComposeCluster(f"minikafka-bench-{os.getpid()}", (free_port(), free_port(), free_port()))
    try:
        up = cluster.up()
    finally:
        started = time.monotonic()
        cluster.down()
        down = time.monotonic() - started
    rows.append(("compose up: ZooKeeper + 3 brokers healthy", f"{up:.1f} s", "< 60 s", up < 60))
    rows.append(("compose down -v", f"{down:.1f} s", "< 30 s", down < 30))
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 21, "compose")


if __name__ == "__main__":
    raise SystemExit(main())
