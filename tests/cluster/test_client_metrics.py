"""KIP-714 client metrics against a real broker, judged by confluent-kafka 2.16 (librdkafka
2.16 pushes its metrics by default, `enable.metrics.push=true`): a CLIENT_METRICS subscription
set with IncrementalAlterConfigs, the producer's pushed metrics on the broker's Prometheus
endpoint agreeing with its own statistics, gone once it closes; no subscription, no push; and
PushTelemetry's errors over the wire."""

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import trio
from chromium import chromium, screenshot
from confluent_kafka import Consumer, Producer
from metrics_helpers import scrape, value

from client.connection import Connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # ZooKeeper and a broker
ZERO = uuid.UUID(int=0)


async def subscribe(broker, name: str, configs: dict[str, str]) -> int:
    """IncrementalAlterConfigs SET on the CLIENT_METRICS resource `name` (type 16)."""
    async with Connection.open(broker.host, broker.port) as conn:
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]
        body = {"resources": [{"resource_type": 16, "resource_name": name, "configs": ops}], "validate_only": False}
        r = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
    return r.responses[0].error_code


def produce_for(broker, seconds: float, stats: list) -> Producer:
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": "orders-app",
            "statistics.interval.ms": 500,
            "stats_cb": stats.append,
        }
    )
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        p.produce("pushed", b"x")
        p.poll(0.05)
    assert p.flush(10) == 0
    return p


def pushed(samples: dict, prefix: str) -> dict:
    return {k: v for k, v in samples.items() if k[0].startswith(prefix)}


def test_a_producer_pushes_its_metrics_to_prometheus_and_they_go_when_it_closes(start_broker):
    broker = start_broker(1, metrics_port=0)
    subscription = {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"}
    assert trio.run(subscribe, broker, "producers", subscription) == ErrorCode.NONE
    consumers = {"metrics": "org.apache.kafka.consumer.", "interval.ms": "1000", "match": "client_id=audit"}
    assert trio.run(subscribe, broker, "consumers", consumers) == ErrorCode.NONE
    stats: list[str] = []
    p = produce_for(broker, 5, stats)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "audit",
            "client.id": "audit",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe(["pushed"])
    end = time.monotonic() + 5
    while time.monotonic() < end:
        c.poll(0.2)
    samples = scrape(broker)
    read = {name for name, _ in pushed(samples, "org_apache_kafka_consumer_")}
    assert "org_apache_kafka_consumer_fetch_manager_fetch_latency_avg" in read, sorted(read)
    mine = pushed(samples, "org_apache_kafka_producer_")
    names = {name for name, _ in mine}
    assert {"org_apache_kafka_producer_request_latency_avg", "org_apache_kafka_producer_record_queue_time_avg"} <= names
    labels = dict(next(iter(mine))[1])
    assert labels["client_id"] == "orders-app" and labels["principal"] == "User:ANONYMOUS"
    assert labels["client_software_name"] == "confluent-kafka-python"
    assert labels["client_software_version"].startswith("2.16")
    assert not [
        k
        for k in pushed(samples, "org_apache_kafka_")
        if dict(k[1])["client_id"] == "orders-app" and "consumer" in k[0]
    ]
    # the pushed connection count is the producer's own (its statistics: connects per broker)
    connects = sum(b["connects"] for b in json.loads(stats[-1])["brokers"].values())
    created = [v for (name, _), v in mine.items() if name == "org_apache_kafka_producer_connection_creation_total"]
    assert created == [connects]
    assert value(samples, "kafka_server_client_metrics_instance_count") == 2  # the producer and the consumer
    if chromium() is not None:  # make setup installs Debian's chromium
        url = broker.metrics_url.removesuffix("metrics") + "clients"
        dom = screenshot(url, Path(__file__).resolve().parents[2] / "build" / "screenshots" / "console" / "clients.png")
        assert "orders-app" in dom and "confluent-kafka-python 2.16" in dom and "User:ANONYMOUS" in dom
        assert "Pushed metrics (KIP-714)" in dom and "produce latency avg (ms)" in dom
        cells = [re.sub("<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", dom)]
        assert "audit" in cells and cells.count("orders-app") >= 2  # connected, and pushing
    c.close()
    del p, c  # destroyed: each one's last push says it is terminating
    # The two instances go in whichever expiry pass follows each one's terminating push (or, for a
    # push that did not arrive, two intervals of silence): waited for together, within a bound.
    deadline = time.monotonic() + 10
    while pushed(samples := scrape(broker), "org_apache_kafka_producer_") or value(
        samples, "kafka_server_client_metrics_instance_count"
    ):
        assert time.monotonic() < deadline, (
            "the closed clients' metrics never aged out",
            sorted(pushed(samples, "org_apache_kafka_")),
            value(samples, "kafka_server_client_metrics_instance_count"),
        )
        time.sleep(0.5)


def test_without_a_subscription_clients_push_nothing(start_broker):
    broker = start_broker(1, metrics_port=0)
    produce_for(broker, 3, [])
    samples = scrape(broker)
    asked = value(
        samples, "kafka_network_requestmetrics_requests_total", request="GetTelemetrySubscriptions", version="0"
    )
    assert asked >= 1  # it asked, was told no metrics are wanted
    assert value(samples, "kafka_server_client_metrics_push_total") == 0
    assert not pushed(samples, "org_apache_kafka_")


async def test_push_telemetry_errors_over_the_wire(start_broker):
    broker = start_broker(1)
    assert await subscribe(broker, "all", {"metrics": "*", "interval.ms": "60000"}) == ErrorCode.NONE
    async with Connection.open(broker.host, broker.port) as conn:
        got = await conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO})
        assert got.error_code == ErrorCode.NONE and got.client_instance_id != ZERO
        assert list(got.requested_metrics) == [""] and got.push_interval_ms == 60000
        assert list(got.accepted_compression_types) == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy

        async def push(metrics: bytes, subscription_id=got.subscription_id, codec=0, terminating=False):
            body = {
                "client_instance_id": got.client_instance_id,
                "subscription_id": subscription_id,
                "terminating": terminating,
                "compression_type": codec,
                "metrics": metrics,
            }
            return (await conn.request(ApiKey.PUSH_TELEMETRY, body)).error_code

        assert await push(b"", subscription_id=got.subscription_id + 1) == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        assert await push(b"") == ErrorCode.NONE
        assert await push(b"") == ErrorCode.THROTTLING_QUOTA_EXCEEDED  # within the 60 s interval
        assert await push(b"x" * (1024 * 1024 + 1), terminating=True) == ErrorCode.TELEMETRY_TOO_LARGE
        assert await push(b"\xff\xff\xff", terminating=True) == ErrorCode.INVALID_RECORD
        again = await conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": got.client_instance_id})
        assert again.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        listed = await conn.request(ApiKey.LIST_CONFIG_RESOURCES, {"resource_types": [16]}, version=1)
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("all", 16)]


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "minikafka_cli.main", "client-metrics", "--bootstrap-server", broker.bootstrap]
    return subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)


def test_the_client_metrics_cli_manages_subscriptions_as_kafka_client_metrics_sh(start_broker):
    broker = start_broker(1)
    made = cli(
        broker, "--alter", "--name", "slow-consumers", "--metrics", "org.apache.kafka.consumer.", "--interval", "2000"
    )
    assert made.returncode == 0, made.stderr
    assert cli(broker, "--alter", "--name", "all", "--metrics", "*", "--match", "client_id=orders-.*").returncode == 0
    assert cli(broker, "--list").stdout.split() == ["NAME", "all", "slow-consumers"]
    described = [line.split() for line in cli(broker, "--describe").stdout.splitlines()]
    assert described == [
        ["NAME", "METRICS", "INTERVAL-MS", "MATCH"],
        ["all", "*", "300000", "client_id=orders-.*"],
        ["slow-consumers", "org.apache.kafka.consumer.", "2000", "-"],
    ]
    bad = cli(broker, "--alter", "--name", "x", "--interval", "5")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    wrong = cli(broker, "--alter", "--name", "x", "--match", "colour=red")
    assert wrong.returncode == 1 and "INVALID_CONFIG" in wrong.stderr
    assert cli(broker, "--alter", "--name", "x").returncode == 2  # nothing to change
    assert cli(broker, "--delete", "--name", "all").returncode == 0
    assert cli(broker, "--list").stdout.split() == ["NAME", "slow-consumers"]
