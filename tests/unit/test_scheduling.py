"""`make test`'s heavy tier keeps the Docker tests on one xdist worker (tests/conftest.py's
scheduler): two compose clusters at once starve each other on 2 cores."""

import sys


def docker_scope(nodeid: str) -> str:
    return sys.modules["conftest"].docker_scope(nodeid)


def test_docker_modules_and_tests_share_one_scope():
    assert docker_scope("tests/chaos/test_chaos_docker.py::test_docker_scenario[docker-kill-leader]") == "docker"
    assert (
        docker_scope("tests/cluster/test_compose_cluster.py::test_clients_on_the_host_use_the_external_listeners")
        == "docker"
    )
    bench = "tests/cluster/test_bench.py::test_quick_compose_bench_prints_measured_against_targets"
    assert docker_scope(bench) == "docker"


def test_every_other_test_is_its_own_scope():
    for nodeid in (
        "tests/chaos/test_chaos.py::test_late_write_scenario[verification-off]",
        "tests/cluster/test_bench.py::test_quick_testing_bench_prints_start_times_and_the_topic_factory_cost",
        "tests/cluster/test_compose_cluster_extra.py::test_x",
    ):
        assert docker_scope(nodeid) == nodeid
