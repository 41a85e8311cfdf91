"""ZooKeeper session loss is survivable (issue 33): a broker whose session expires, and whose next
session expires too before it could re-register, keeps running, registers again with a new broker
epoch, and serves. The faults are made by `local_cluster.zk_fault_proxy` between one broker and
the real ZooKeeper; everything else is real (broker processes, ZooKeeper, confluent-kafka)."""

from __future__ import annotations

import json
import re
import time

import pytest
from admin_helpers import wait
from proxy_helpers import FaultProxyProcess

from local_cluster.brokers import LOG

SESSION_MS = 3000  # local_cluster's zookeeper.session.timeout.ms


@pytest.fixture
def zk_proxy(zookeeper):
    proxy = FaultProxyProcess(zookeeper.connect)
    yield proxy
    proxy.close()


def broker_log(broker) -> str:
    return (broker.directory / LOG).read_text(errors="replace")


def registration(zk, broker_id):
    found = zk.exists(f"/brokers/ids/{broker_id}")
    return None if found is None else (found.czxid, found.ephemeralOwner)


def expire_session_twice(broker, proxy) -> None:
    """Silence the broker's ZooKeeper traffic past its session; let only the handshakes through
    (a new session is made, the registration under it is not); silence again past that session;
    then let everything through."""
    proxy.mode("drop")
    time.sleep(2 * SESSION_MS / 1000 + 1)
    proxy.mode("handshake")
    wait(lambda: "ZooKeeper session expired (1 " in broker_log(broker), "the first expiry seen", 30)
    wait(lambda: "with a new session" in broker_log(broker), "a second session", 30)
    time.sleep(1)
    proxy.mode("drop")
    time.sleep(2 * SESSION_MS / 1000 + 1)
    proxy.mode("pass")


def test_a_broker_whose_session_expires_twice_keeps_running_and_registers_again(start_broker, zk, zk_connect, zk_proxy):
    chroot = "/" + zk_connect.split("/", 1)[1]
    other = start_broker(2)
    broker = start_broker(1, **{"zookeeper.connect": f"127.0.0.1:{zk_proxy.port}{chroot}"})
    wait(lambda: json.loads(zk.get("/controller")[0])["brokerid"] in (1, 2), "a controller")
    before = registration(zk, 1)

    expire_session_twice(broker, zk_proxy)

    wait(lambda: "re-registered /brokers/ids/1" in broker_log(broker), "re-registration", 60)
    assert broker.process.poll() is None, broker.log_tail()
    after = registration(zk, 1)
    assert after is not None and after[0] > before[0], "a new registration, a new broker epoch"
    expirations = re.findall(r"ZooKeeper session expired \((\d+) since", broker_log(broker))
    assert len(expirations) >= 2, expirations

    # it serves again: a topic on both brokers takes acks=all writes, and confluent-kafka sees both
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = f"{broker.bootstrap},{other.bootstrap}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("after-expiry", 2, 2)])["after-expiry"].result(30)
    wait(lambda: len(admin.list_topics(timeout=10).brokers) == 2, "both brokers in the metadata", 30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    delivered = []
    for i in range(20):
        producer.produce("after-expiry", str(i).encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 20
    assert broker.process.poll() is None and other.process.poll() is None
