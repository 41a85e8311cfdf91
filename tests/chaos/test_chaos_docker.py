"""The chaos scenarios on real hosts (chaos/docker_runner.py, `make chaos-docker`) as part of
`make test` where a Docker engine answers: the chaos workload and checker against the compose
cluster while Docker kills, pauses, stops (SIGTERM) or disconnects a broker's container, cuts
one off from ZooKeeper, or kills one and then two of the three ZooKeeper nodes. CHAOS_SEED=<seed> reproduces a run's choices."""

import os
import random

import pytest
import trio
from compose_helpers import running_cluster, skip_without_docker

from chaos.docker_runner import SCENARIOS, run_scenario
from chaos.runner import iptables_works

pytestmark = pytest.mark.slow

skip_without_docker("chaos-docker")

SEED = int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30)))


@pytest.fixture(scope="module")
def cluster():
    with running_cluster("minikafka-chaos-test") as c:
        yield c


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_docker_scenario(name, cluster):
    if name == "docker-zk-partition" and not iptables_works():
        pytest.skip("iptables does not work here (needs root and CAP_NET_ADMIN)")
    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_scenario, name, SEED, cluster, 7.0)  # `make chaos-docker`: 14 s
    print(
        f"{name}: {what}; sent {report.attempted}, acked {report.acked}, failed {report.failed}, "
        f"lost {len(report.lost)}, duplicated {len(report.duplicated)}, "
        f"longest without a leader {report.max_leaderless_s:.1f} s, violations {report.violations()}"
    )
    assert report.acked > 500, "the workload made too little progress to judge"
    assert report.ok, report.violations()
    assert report.liveness.ok, report.liveness.violations()
    if name == "docker-kill-zk-leader":  # one ZooKeeper node down stops nothing: every write acknowledged
        assert report.failed == 0 and report.acked == report.attempted, what
