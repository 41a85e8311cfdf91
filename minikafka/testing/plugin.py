"""The pytest plugin (entry point `pytest11: minikafka`): real minikafka clusters as fixtures.

Fixtures:
- `kafka_cluster`: a `KafkaCluster` shared by the whole session (one per distinct size and
  security mode, started on first use, stopped at the session's end). Its size and security come
  from the test's `@pytest.mark.kafka_cluster(brokers=3, security="sasl_ssl")` marker, else from
  `--kafka-brokers` / `--kafka-security` (defaults 1 and plaintext). ZooKeeper is started from
  its jars (see `local_cluster.zookeeper.classpath`), or a running one is used with
  `--kafka-zookeeper HOST:PORT` or `MINIKAFKA_ZOOKEEPER`. After each test the cluster
  is healed: paused brokers resume and stopped ones start again, so a failure test does not leak.
- `kafka_topic`: a factory, `kafka_topic(partitions=1, replication_factor=-1, config=None,
  name=None) -> name`; a unique name by default; the topics it made are deleted after the test.
- `admin`: a `minikafka.testing.Admin` on `kafka_cluster` (topics, records, offsets, lag).

Every process dies with the pytest process (PR_SET_PDEATHSIG), even if pytest is killed. An
interrupted run (Ctrl-C) skips the healing and the topic clean-up and only kills the clusters.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from minikafka.testing.admin import Admin
from minikafka.testing.cluster import SECURITY_MODES, ZOOKEEPER_ENV, KafkaCluster


def pytest_addoption(parser):
    group = parser.getgroup("minikafka", "minikafka test clusters")
    group.addoption("--kafka-brokers", type=int, default=1, help="brokers in kafka_cluster (default 1)")
    group.addoption(
        "--kafka-security",
        choices=SECURITY_MODES,
        default="plaintext",
        help="the listeners' security protocol in kafka_cluster (default plaintext)",
    )
    group.addoption(
        "--kafka-zookeeper",
        metavar="HOST:PORT",
        default=None,
        help=f"use this running ZooKeeper instead of starting one (default ${ZOOKEEPER_ENV})",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "kafka_cluster(brokers=1, security='plaintext', **broker_config): the kafka_cluster this test gets",
    )


class _Clusters:
    """The session's clusters, one per (brokers, security, broker config); on `zookeeper`
    (HOST:PORT, None: each starts its own) when given."""

    def __init__(self, zookeeper: str | None = None):
        self.started: dict[tuple, KafkaCluster] = {}
        self.zookeeper = zookeeper

    def get(self, brokers: int, security: str, broker_config: dict[str, str]) -> KafkaCluster:
        key = (brokers, security, tuple(sorted(broker_config.items())))
        if key not in self.started:
            cluster = KafkaCluster(brokers, security=security, broker_config=broker_config, zookeeper=self.zookeeper)
            self.started[key] = cluster.start()
        return self.started[key]

    def close(self) -> None:
        for cluster in self.started.values():
            cluster.close()
        self.started.clear()


@pytest.fixture(scope="session")
def _minikafka_clusters(request):
    clusters = _Clusters(request.config.getoption("--kafka-zookeeper"))
    try:
        yield clusters
    finally:
        clusters.close()


def _interrupted(request) -> bool:
    """The run was interrupted (Ctrl-C, SIGINT, `pytest.exit`): fixtures then skip healing and
    topic clean-up, since restarting brokers and waiting up to a minute for them would only
    delay the exit; the session's clusters are still killed and their directories removed."""
    return request.session.exitstatus == pytest.ExitCode.INTERRUPTED


@pytest.fixture
def kafka_cluster(request, _minikafka_clusters) -> Iterator[KafkaCluster]:
    marker = request.node.get_closest_marker("kafka_cluster")
    options = dict(marker.kwargs) if marker else {}
    brokers = int(options.pop("brokers", request.config.getoption("--kafka-brokers")))
    security = options.pop("security", request.config.getoption("--kafka-security"))
    broker_config = {k.replace("_", "."): str(v) for k, v in options.items()}
    cluster = _minikafka_clusters.get(brokers, security, broker_config)
    yield cluster
    if not _interrupted(request):
        cluster.heal()


@pytest.fixture
def admin(kafka_cluster) -> Admin:
    return kafka_cluster.admin()


@pytest.fixture
def kafka_topic(request, kafka_cluster, admin):
    made: list[str] = []
    base = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:120]

    def make(
        partitions: int = 1, replication_factor: int = -1, config: dict[str, str] | None = None, name: str | None = None
    ) -> str:
        topic = name or f"{base}-{uuid.uuid4().hex[:8]}"
        admin.create_topic(topic, partitions, replication_factor, config)
        made.append(topic)
        return topic

    yield make
    if _interrupted(request):
        return
    if made:
        kafka_cluster.heal()  # a topic is deleted once every replica's broker is back (Kafka's rule)
    for topic in made:
        try:
            admin.delete_topic(topic)
        except Exception:  # a test that broke its cluster must not hide its own failure behind this
            pass
