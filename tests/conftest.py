import pathlib
import sys

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
}


#: the tiers (README "Tests"): tests/unit/ starts no process (a test there using a process
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
        if item.module.__name__.rpartition(".")[2] in HEAVY_MODULES:
            item.add_marker(pytest.mark.heavy)


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


@pytest.fixture(scope="module")
def spark():
    """A local[2] SparkSession with the `minikafka` data source registered (one per test module)."""
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
