"""Admin requests are answered within their timeout, and every broker names the real controller
(issue 33, causes 3 and 5). Real brokers, a real ZooKeeper; `local_cluster.zk_fault_proxy`
silences one path (a broker's ZooKeeper traffic, or the controller's requests to one broker)."""

from __future__ import annotations

import time

import pytest
import trio
from admin_helpers import raw, wait
from metrics_helpers import scrape, value
from proxy_helpers import FaultProxyProcess
from replication_helpers import controller_of

from client.connection import Connection
from local_cluster.ports import free_port
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.types import ZERO_UUID


def create_body(name: str, timeout_ms: int, partitions: int = 1, rf: int = 1) -> dict:
    return {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "configs": []}],
        "timeout_ms": timeout_ms,
    }


def timed(broker, api_key, body) -> tuple[object, float]:
    """(response, seconds to the answer) of one request on a fresh connection; a dropped
    connection raises (the request was not answered)."""

    async def go():
        async with Connection.open(broker.host, broker.port) as conn:
            started = trio.current_time()
            response = await conn.request(api_key, body, timeout_s=60)
            return response, trio.current_time() - started

    return trio.run(go)


@pytest.fixture
def proxies():
    started = []

    def start(target: str) -> FaultProxyProcess:
        proxy = FaultProxyProcess(target)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.close()


def test_admin_requests_are_answered_within_their_timeout_while_zookeeper_is_unreachable(
    start_broker, zookeeper, zk_connect, proxies
):
    """Cause 3: CreateTopics waited in the controller's event queue behind work stuck on
    ZooKeeper and was never answered (the connection was dropped after 5 s). Now it is answered
    REQUEST_TIMED_OUT at its timeout, and so is an event of the controller's loop (DeleteTopics);
    an InitProducerId that must claim producer ids from ZooKeeper answers COORDINATOR_NOT_AVAILABLE."""
    proxy = proxies(zookeeper.connect)
    chroot = "/" + zk_connect.split("/", 1)[1]
    broker = start_broker(
        1, **{"zookeeper.connect": f"127.0.0.1:{proxy.port}{chroot}", "zookeeper.session.timeout.ms": "20000"}
    )
    wait(lambda: raw(broker, ApiKey.METADATA, {"topics": []}).controller_id == 1, "the controller", 30)
    created, _ = timed(broker, ApiKey.CREATE_TOPICS, create_body("before", 10_000))
    assert created.topics[0].error_code == ErrorCode.NONE

    proxy.mode("drop")
    created, took = timed(broker, ApiKey.CREATE_TOPICS, create_body("during", 2000))
    assert created.topics[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert took < 2000 / 1000 + 5, took  # the ZooKeeper budget is at least 5 s
    deleted, took = timed(
        broker, ApiKey.DELETE_TOPICS, {"topics": [{"name": "before", "topic_id": ZERO_UUID}], "timeout_ms": 2000}
    )
    assert deleted.responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
    assert took < 5 + 2, took

    # the first InitProducerId claims a block of producer ids in ZooKeeper: answered, retriably
    init, took = timed(broker, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert init.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and took < 5 + 2, (init.error_code, took)

    proxy.mode("pass")
    # as a client does, retry the retriable error within a bound: the broker's ZooKeeper session
    # reconnects with backoff (at most 2 s between tries), as Kafka's ZooKeeperClient waits to reconnect
    answers = []

    def init_answered() -> bool:
        init, _ = timed(broker, ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000})
        answers.append(init)
        assert init.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE), init
        return init.error_code == ErrorCode.NONE

    wait(init_answered, "InitProducerId answered after the heal", 15)
    assert answers[-1].producer_id >= 0
    created, _ = timed(broker, ApiKey.CREATE_TOPICS, create_body("after", 30_000))
    assert created.topics[0].error_code == ErrorCode.NONE
    assert broker.process.poll() is None


def test_a_broker_names_the_new_controller_when_the_controllers_requests_cannot_reach_it(start_broker, zk, proxies):
    """Cause 5: a broker named the controller only from UpdateMetadata, so one the (new)
    controller could not reach told clients a dead or deposed broker was the controller, and
    their CreateTopics were answered NOT_CONTROLLER on every retry. Now every broker follows
    /controller itself."""
    control_port = free_port()
    proxy = proxies(f"127.0.0.1:{control_port}")  # the controller's requests to broker 2 pass here
    common = {
        "control_plane_listener_name": "CONTROLLER",
        "listener_security_protocol_map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }
    first = start_broker(1, listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0", **common)
    wait(lambda: controller_of(zk) == 1, "broker 1 the controller", 30)
    second = start_broker(
        2,
        listeners=f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{control_port}",
        advertised_listeners=f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{proxy.port}",
        **common,
    )
    wait(lambda: raw(second, ApiKey.METADATA, {"topics": []}).controller_id == 1, "broker 2 told of broker 1", 30)

    proxy.mode("drop")  # nothing the controller sends reaches broker 2, not even its own requests
    first.kill()
    wait(lambda: controller_of(zk) == 2, "broker 2 elected", 30)
    elected = time.monotonic()
    wait(lambda: raw(second, ApiKey.METADATA, {"topics": []}).controller_id == 2, "broker 2 names itself", 10)
    assert time.monotonic() - elected < 5

    proxy.mode("pass")  # its requests arrive: the metadata follows, and topics can be created
    created, _ = timed(second, ApiKey.CREATE_TOPICS, create_body("after", 30_000))
    assert created.topics[0].error_code == ErrorCode.NONE


def test_a_new_controller_removes_the_dead_controllers_replicas_from_every_isr(start_broker, zk):
    """Cause 4's stall: the broker that died was also the controller; the new controller left its
    replicas in the ISRs of partitions led elsewhere, so every acks=-1 write there (transaction
    markers, group offsets, produce) waited replica.lag.time.max.ms (30 s) for a dead follower.
    Kafka's controller takes them out at failover (OfflineReplica)."""
    from replication_helpers import partition_state

    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    wait(lambda: controller_of(zk) in brokers, "a controller", 30)
    wait(lambda: len(raw(brokers[1], ApiKey.METADATA, {"topics": []}).brokers) == 3, "3 brokers known", 30)
    victim = controller_of(zk)
    other = next(b for i, b in brokers.items() if i != victim)
    created, _ = timed(brokers[victim], ApiKey.CREATE_TOPICS, create_body("t", 30_000, partitions=6, rf=3))
    assert created.topics[0].error_code == ErrorCode.NONE
    wait(lambda: all(len(partition_state(zk, "t", p)["isr"]) == 3 for p in range(6)), "full ISRs", 30)
    brokers[victim].kill()
    killed = time.monotonic()
    wait(lambda: controller_of(zk) not in (None, victim), "a new controller", 30)
    wait(
        lambda: all(victim not in partition_state(zk, "t", p)["isr"] for p in range(6)),
        "the dead broker out of every ISR",
        30,
    )
    assert time.monotonic() - killed < 15  # the session timeout (3 s) and a failover, not 30 s of lag
    assert other.process.poll() is None


def test_a_burst_of_isr_change_notifications_is_taken_in_a_few_events(start_broker, zk):
    """A chaos run's restarted broker waited 54 s for the controller to notice it: leaders
    shrinking and growing dozens of ISRs at once write one /isr_change_notification znode each,
    the children watch fired once per znode, and each firing queued an event that re-read every
    notification it had listed, one ZooKeeper round trip at a time, ahead of the BrokerChange.
    Now one such event waits in the queue at most and takes every notification present when it
    runs (reads and deletes pipelined), so a burst costs a few events (Kafka's
    IsrChangeRateAndTimeMs counts them)."""
    from zk import znodes

    broker = start_broker(1, metrics_port=0)
    wait(lambda: controller_of(zk) == 1, "broker 1 the controller", 30)
    created, _ = timed(broker, ApiKey.CREATE_TOPICS, create_body("t", 30_000))
    assert created.topics[0].error_code == ErrorCode.NONE
    events = "kafka_controller_controllerstats_isrchangerateandtimems_count"
    queue = "kafka_controller_controllereventmanager_eventqueuesize"
    first = scrape(broker)
    assert (events, ()) in first and (queue, ()) in first
    before = value(first, events)

    body = znodes.encode_partitions([("t", 0)])
    path = f"{znodes.ISR_CHANGE_NOTIFICATION}/isr_change_"
    pending = [zk.create_async(path, body, sequence=True) for _ in range(400)]
    for result in pending:
        result.get(30)
    wait(lambda: not zk.get_children(znodes.ISR_CHANGE_NOTIFICATION), "every notification taken", 60)
    wait(lambda: value(scrape(broker), queue) == 0, "the controller's event queue empty", 120)
    taken_in = value(scrape(broker), events) - before
    assert 1 <= taken_in <= 20, taken_in
    created, _ = timed(broker, ApiKey.CREATE_TOPICS, create_body("after", 10_000))
    assert created.topics[0].error_code == ErrorCode.NONE
