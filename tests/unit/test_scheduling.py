"""`make test`'s heavy tier keeps the Docker tests on one xdist worker (tests/conftest.py's
scheduler): two compose clusters at once starve each other on 2 cores. Its other tier keeps the
Spark modules on one worker: they share one SparkSession there. The Docker unit is handed out
once no image build is running (`make test` starts one in the background)."""

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


def file_scope(nodeid: str) -> str:
    return sys.modules["conftest"].file_scope(nodeid)


def test_the_spark_modules_share_one_scope_and_other_files_are_their_own():
    conftest = sys.modules["conftest"]
    for module in conftest.SPARK_MODULES:
        assert file_scope(f"tests/cluster/{module}.py::test_x[a]") == "spark"
    assert file_scope("tests/cluster/test_replication.py::test_y") == "tests/cluster/test_replication.py"
    assert (
        file_scope("tests/cluster/test_spark_connector_sinks.py::test_z")
        == "tests/cluster/test_spark_connector_sinks.py"
    )


def test_the_spark_modules_are_every_module_that_uses_the_spark_session():
    """A module of the other tier that uses the `spark` fixture outside SPARK_MODULES would start
    a JVM of its own (the heavy tier's compose module has one on the Docker worker)."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1] / "cluster"
    users = {
        path.stem for path in root.glob("test_*.py") if re.search(r"def test_\w+\([^)]*\bspark\b", path.read_text())
    }
    conftest = sys.modules["conftest"]
    assert users - conftest.HEAVY_MODULES == conftest.SPARK_MODULES


def test_the_docker_unit_waits_for_a_running_image_build_and_then_goes_first():
    from collections import OrderedDict

    place = sys.modules["conftest"].place_docker_unit
    queue = OrderedDict.fromkeys(["docker", "a", "b"])
    place(queue, building=True)
    assert list(queue) == ["a", "b", "docker"]
    place(queue, building=False)
    assert list(queue) == ["docker", "a", "b"]
    only = OrderedDict.fromkeys(["docker"])
    place(only, building=True)  # nothing else to hand out: the worker takes it and waits
    assert list(only) == ["docker"]
    none = OrderedDict.fromkeys(["a", "b"])
    place(none, building=True)
    assert list(none) == ["a", "b"]


def test_images_building_sees_another_holder_of_the_build_lock(tmp_path, monkeypatch):
    from local_cluster import compose

    monkeypatch.setattr(compose, "IMAGES_LOCK", tmp_path / "images.lock")
    assert not compose.images_building()
    with compose._exclusive(compose.IMAGES_LOCK):  # another open file: flock(2) conflicts as across processes
        assert compose.images_building()
    assert not compose.images_building()


def test_build_images_holds_the_lock_while_it_builds(tmp_path, monkeypatch):
    """What the scheduler reads: any build (the background one of `make test`, or a Docker test's
    own) holds IMAGES_LOCK from start to end, and gives it back."""
    from local_cluster import compose

    monkeypatch.setattr(compose, "IMAGES_LOCK", tmp_path / "images.lock")
    seen = []
    monkeypatch.setattr(compose, "_build_images", lambda log: seen.append(compose.images_building()) or {})
    assert compose.build_images() == {}
    assert seen == [True]
    assert not compose.images_building()
