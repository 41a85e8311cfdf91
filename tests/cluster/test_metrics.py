"""Prometheus metrics scraped from live brokers (`metrics.port`): values that must move do (bytes
and messages in after a produce, bytes out after a consume, requests and their errors, log end
offsets, a group's lag, an ISR shrink and under-replication while a follower is paused), and the
endpoint answers bad requests with HTTP errors, not a crash."""

import signal
import socket

import pytest
import trio
from group_helpers import GROUP_BROKER
from metrics_helpers import scrape, value
from replication_helpers import create_topic, partition_state, wait_for

from client import Cluster, KafkaError
from client.groups import commit_offsets
from client.producer import Producer
from client.reads import fetch_records

pytestmark = pytest.mark.slow


def raw_http(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


async def test_metrics_move_with_the_cluster(start_broker, zk):
    lag_ms = 1500
    # the paused follower's ZooKeeper session (30 s) outlasts the pause, so the ISR shrink is the
    # leader's (counted in its metrics), not the controller's removal of a broker whose session
    # expired, which won the race in a loaded run with the 3 s default
    settings = GROUP_BROKER | {
        "metrics_port": 0,
        "replica_lag_time_max_ms": lag_ms,
        "zookeeper_session_timeout_ms": 30_000,
    }
    brokers = {i: start_broker(i, **settings) for i in (1, 2, 3)}
    assert all(b.metrics_url for b in brokers.values())
    await create_topic(brokers, zk, "m", partitions=1, rf=3)
    await wait_for(lambda: len(partition_state(zk, "m", 0)["isr"]) == 3)
    leader = brokers[partition_state(zk, "m", 0)["leader"]]
    before = await trio.to_thread.run_sync(scrape, leader)

    async with Cluster.open(leader.bootstrap) as cluster:
        async with Producer.open(cluster) as producer:
            for _ in range(100):
                await producer.send("m", b"x" * 100, partition=0)
        await fetch_records(cluster, "m", 0, 0, max_wait_ms=0, max_bytes=1 << 20)
        await commit_offsets(cluster, "lagging", {("m", 0): 40})
        with pytest.raises(KafkaError, match="OFFSET_OUT_OF_RANGE"):  # an error the request metrics count
            await fetch_records(cluster, "m", 0, 10_000, max_wait_ms=0, max_bytes=1024)

    after = await trio.to_thread.run_sync(scrape, leader)
    moved = value(after, "kafka_server_brokertopicmetrics_bytesin_total", topic="m") - value(
        before, "kafka_server_brokertopicmetrics_bytesin_total", topic="m"
    )
    assert moved >= 100 * 100
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic="m") == 100
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total", topic="m") >= 100 * 100
    assert value(after, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic="m") >= 2 * 100 * 100
    assert value(after, "kafka_log_log_logendoffset", topic="m", partition="0") == 100
    assert value(after, "kafka_log_log_size", topic="m", partition="0") > 100 * 100
    produce_requests = sum(
        v
        for (name, labels), v in after.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", "Produce") in labels
    )
    assert produce_requests >= 1
    assert value(after, "kafka_network_requestmetrics_errors_total", request="Fetch", error="OFFSET_OUT_OF_RANGE") >= 1
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_requests
    assert value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(after, "kafka_server_replicamanager_leadercount") >= 1
    actives = [
        value(await trio.to_thread.run_sync(scrape, b), "kafka_controller_kafkacontroller_activecontrollercount")
        for b in brokers.values()
    ]
    assert sorted(actives) == [0, 0, 1]
    elections = [
        value(
            await trio.to_thread.run_sync(scrape, b),
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
        )
        for b in brokers.values()
    ]
    assert sum(elections) >= 1  # the new partition's leader (and __consumer_offsets'), by the controller

    # the group's lag, reported by its coordinator: HW 100 - committed 40 (a follower's HW
    # catches up with its next fetch)
    def lags() -> list[float]:
        scrapes = [scrape(b) for b in brokers.values()]
        return sorted(
            value(x, "kafka_consumergroup_lag", consumergroup="lagging", topic="m", partition="0") for x in scrapes
        )

    await wait_for(lambda: lags() == [0, 0, 60], timeout_s=15)

    # a paused follower falls out of the ISR: the leader counts the shrink and the partition as
    # under-replicated until it is back. The leader commits an ISR change (and counts it) when
    # its ZooKeeper write returns, which a reader of the znode can see first: after the znode,
    # wait for the leader's own count, as a dashboard would (a fresh clone once scraped between)
    follower = next(b for i, b in brokers.items() if b is not leader)
    follower.process.send_signal(signal.SIGSTOP)
    try:
        await wait_for(lambda: len(partition_state(zk, "m", 0)["isr"]) == 2, timeout_s=lag_ms / 1000 + 15)
        await wait_for(lambda: value(scrape(leader), "kafka_server_replicamanager_isrshrinks_total") >= 1, 10)
        paused = await trio.to_thread.run_sync(scrape, leader)
        assert value(paused, "kafka_server_replicamanager_isrshrinks_total") >= 1
        assert value(paused, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    finally:
        follower.process.send_signal(signal.SIGCONT)
    await wait_for(lambda: len(partition_state(zk, "m", 0)["isr"]) == 3, timeout_s=30)
    await wait_for(lambda: value(scrape(leader), "kafka_server_replicamanager_isrexpands_total") >= 1, 10)
    back = await trio.to_thread.run_sync(scrape, leader)
    assert value(back, "kafka_server_replicamanager_isrexpands_total") >= 1
    assert value(back, "kafka_server_replicamanager_underreplicatedpartitions") == 0

    # the process's own metrics, as prometheus_client exposes them for any Python service
    assert value(back, "process_cpu_seconds_total") > 0 and value(back, "process_resident_memory_bytes") > 0
    assert value(back, "python_gc_collections_total", generation="0") >= 1

    # the endpoint's answers to what is not a scrape
    port = leader.metrics_port
    assert raw_http(port, b"GET /nothing HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
    assert raw_http(port, b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405")
    assert raw_http(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw_http(port, b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 2000) == b""  # head over 8 KiB: closed
    assert (
        leader.alive
        and value(await trio.to_thread.run_sync(scrape, leader), "kafka_server_replicamanager_leadercount") >= 1
    )
