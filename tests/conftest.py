import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))


import uuid as _uuid

import pytest

from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess

#: fixtures that start processes (ZooKeeper, brokers): a test using one, directly or through another
#: fixture, is marked `slow` (`make test-fast` runs the others; `make test` runs everything)
PROCESS_FIXTURES = {"zookeeper", "start_broker"}


#: modules whose tests keep the machine's cores busy (chaos workloads, benches, Spark jobs) or share
#: Docker's images and networks: marked `heavy`. `make test` runs them one at a time in one pytest
#: process while a second process runs the other tests, which mostly wait on sockets and timers
HEAVY_MODULES = {
    "test_bench",
    "test_chaos",
    "test_chaos_docker",
    "test_compose_cluster",
    "test_compose_security",
    "test_main_job",
    "test_testing_plugin_spark",
    "test_wheel_install",  # pip-installs a wheel and its clients into a fresh virtualenv
}


#: heavy modules that share Docker's images, networks and a compose cluster: `make test` runs the
#: heavy tier on two pytest-xdist workers (`--dist loadgroup`), and these run one after another on
#: one of them (one compose cluster at a time); the other heavy tests are spread test by test
DOCKER_MODULES = {"test_chaos_docker", "test_compose_cluster", "test_compose_security"}
#: single tests elsewhere that build the same images and start a compose cluster: in the same group
#: (run beside the Docker chaos setup, the quick compose bench rebuilt every image a second time)
DOCKER_TESTS = {"test_quick_compose_bench_prints_measured_against_targets"}


def place_docker_unit(workqueue, building: bool) -> None:
    """Before a work unit is handed out: the Docker unit goes last while the images are being built
    (`make test` starts that build in the background; a worker given the unit would only wait on
    it), and first once they are not: it is the heavy tier's longest unit (some 450 s)."""
    if "docker" in workqueue and len(workqueue) > 1:
        workqueue.move_to_end("docker", last=building)


def docker_scope(nodeid: str) -> str:
    """The scheduling unit of a test id: "docker" for the Docker tests, else the test itself."""
    path, _, rest = nodeid.partition("::")
    module = path.rpartition("/")[2].removesuffix(".py")
    return "docker" if module in DOCKER_MODULES or rest.partition("[")[0] in DOCKER_TESTS else nodeid


#: modules that use the `spark` fixture (a SparkSession per pytest process): `make test`'s other
#: tier (`--dist loadfile`) runs them one after another on one worker, so that one JVM starts
#: instead of one per module (27-40 s each in a loaded run), and hands them out first: together
#: they are that tier's longest unit of work (about 450 s), which must not start last
SPARK_MODULES = {"test_spark_connector_source", "test_spark_connector_sink", "test_spark_connector_options"}


def file_scope(nodeid: str) -> str:
    """The scheduling unit of a test id under `--dist loadfile`: "spark" for the Spark modules,
    else the test's file."""
    path = nodeid.partition("::")[0]
    return "spark" if path.rpartition("/")[2].removesuffix(".py") in SPARK_MODULES else path


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` as `make test` means it: the Docker tests one after another on one worker,
    handed out once no image build is running (`place_docker_unit`), every other test on its own.
    xdist's own loadgroup renames test ids (`item._nodeid`), which pytest 9 no longer reads, so its
    groups were split across workers and two compose clusters started at once (CI: a broker never
    became healthy); this scheduler groups by test id.
    `--dist loadfile`: a file per unit of work, except the Spark modules, one unit handed out first."""
    dist = config.getvalue("dist")
    if dist not in ("loadgroup", "loadfile"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    from local_cluster.compose import images_building

    class DockerGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return docker_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            place_docker_unit(self.workqueue, images_building())
            super()._assign_work_unit(node)

    class SparkGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return file_scope(nodeid)

        def _assign_work_unit(self, node) -> None:
            if "spark" in self.workqueue:
                self.workqueue.move_to_end("spark", last=False)
            super()._assign_work_unit(node)

    return (DockerGroupScheduling if dist == "loadgroup" else SparkGroupScheduling)(config, log)


#: a non-chaos test slower than this is named at the end of the run (issue 48: none should be)
SLOW_TEST_S = 60.0
SHARED_SETUP_SHOWN_S = 5.0


#: the tiers (docs/development.md): tests/unit/ starts no process (a test there using a process
#: fixture is a collection error), tests/cluster/ starts real ZooKeeper, brokers and clients,
#: tests/chaos/ runs the chaos scenarios; tests/helpers/ holds what they share
UNIT_DIR = ROOT / "tests" / "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by these marks
def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            if UNIT_DIR in pathlib.Path(str(item.path)).parents:
                raise pytest.UsageError(f"{item.nodeid} starts processes: it belongs in tests/cluster/")
            item.add_marker(pytest.mark.slow)
        module = item.module.__name__.rpartition(".")[2]
        if module in HEAVY_MODULES:
            item.add_marker(pytest.mark.heavy)


#: seconds a test's setup spent making fixtures shared by its module or the session (a Spark
#: session, a compose cluster): the first test to use one pays it for all
SHARED_SETUP_S = pytest.StashKey[float]()


class _SharedSetupTimer:
    """Times the setup of fixtures shared by a module or the session and charges it to no test.
    A plugin registered on every process (xdist workers too), not conftest hooks: pytest runs a
    session-scoped fixture's setup hook through the session's hooks, which include only the
    conftest files at the root, so a hook here never saw the Spark session or ZooKeeper."""

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        if fixturedef.scope == "function":
            return (yield)
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            item = getattr(request, "_pyfuncitem", None)
            if item is not None:
                item.stash[SHARED_SETUP_S] = item.stash.get(SHARED_SETUP_S, 0.0) + time.perf_counter() - started

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if call.when == "setup" and item.stash.get(SHARED_SETUP_S, 0.0):
            report.user_properties.append(("shared_setup_s", item.stash[SHARED_SETUP_S]))
        return report


class _ModuleTimes:
    """Each test module's time (setup, call and teardown of its tests, in seconds), summed from the
    reports; with pytest-xdist the controller receives every worker's reports, so this works there too.
    A test's own time leaves out the setup of fixtures its module or the session shares, which
    is listed apart (issue 48 asks that no test take over 60 s, and that tests share clusters)."""

    def __init__(self):
        self.modules: dict[str, float] = {}
        self.tests: dict[str, float] = {}
        self.shared: dict[str, float] = {}

    def pytest_runtest_logreport(self, report):
        module = report.nodeid.split("::", 1)[0]
        self.modules[module] = self.modules.get(module, 0.0) + report.duration
        shared = dict(report.user_properties).get("shared_setup_s", 0.0)
        if shared:
            self.shared[report.nodeid] = shared
        self.tests[report.nodeid] = self.tests.get(report.nodeid, 0.0) + report.duration - shared

    def pytest_terminal_summary(self, terminalreporter):
        if not self.modules:
            return
        write = terminalreporter.write_line
        terminalreporter.section("time per test module (s), slowest first")
        for module, seconds in sorted(self.modules.items(), key=lambda kv: -kv[1]):
            write(f"{seconds:8.1f}  {module}")
        slow = {n: s for n, s in self.tests.items() if s > SLOW_TEST_S and not n.startswith("tests/chaos/")}
        if slow:
            terminalreporter.section(f"non-chaos tests over {SLOW_TEST_S:.0f} s (issue 48: none should be)")
            for nodeid, seconds in sorted(slow.items(), key=lambda kv: -kv[1]):
                write(f"{seconds:8.1f}  {nodeid}")
        shared = {n: s for n, s in self.shared.items() if s >= SHARED_SETUP_SHOWN_S}
        if shared:
            terminalreporter.section(
                f"shared fixtures set up in over {SHARED_SETUP_SHOWN_S:.0f} s (module or session scope; in no test's time)"
            )
            for nodeid, seconds in sorted(shared.items(), key=lambda kv: -kv[1]):
                write(f"{seconds:8.1f}  {nodeid}")


def pytest_configure(config):
    config.pluginmanager.register(_SharedSetupTimer(), "minikafka-shared-setup-timer")
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist), not a worker
        config.pluginmanager.register(_ModuleTimes(), "minikafka-module-times")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper for the session; tests isolate themselves with a chroot each."""
    zk = ZooKeeperProcess.start(tmp_path_factory.mktemp("zookeeper"))
    yield zk
    zk.stop()


@pytest.fixture
def zk_connect(zookeeper):
    """A zookeeper.connect string with a fresh chroot."""
    return f"{zookeeper.connect}/test-{_uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk(zookeeper, zk_connect):
    """A kazoo client inside the test's chroot (created first, as a broker would)."""
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper.connect)
    root.start(10)
    root.ensure_path("/" + zk_connect.split("/", 1)[1])
    root.stop()
    root.close()
    client = KazooClient(hosts=zk_connect)
    client.start(10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def start_broker(tmp_path, zk_connect):
    """Start broker processes: `start_broker(broker_id, **overrides)`; all are killed at the end."""
    started = []

    def start(broker_id: int = 1, **overrides) -> BrokerProcess:
        broker = BrokerProcess.create(
            broker_id, tmp_path / f"broker-{broker_id}-{len(started)}", zk_connect, **overrides
        )
        started.append(broker)
        return broker.start()

    yield start
    for broker in started:
        broker.kill()


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession with the `minikafka` data source registered, one per pytest process:
    the Spark modules set no session conf and leave no query running, and a session's start (its
    JVM) took 29-39 s per module in a loaded `make test`."""
    pytest.importorskip("pyspark", reason="make setup installs the spark extra")
    from spark_connector.local import local_session

    session = local_session("minikafka-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture
def members():
    """Start consumer group member processes (`member_processes.Member`): `members(bootstrap,
    group, topics, protocol="consumer", **config)`; those still running are killed at the end."""
    from member_processes import Member

    started: list = []

    def start(*args, **kwargs):
        member = Member(*args, **kwargs)
        started.append(member)
        return member

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.kill()
