"""Client quotas on a real broker (issue 34; KIP-13, KIP-55, KIP-124, KIP-219, KIP-546): set and
described with `minikafka configs --entity-type clients|users` (AlterClientQuotas /
DescribeClientQuotas), applied live through /config/changes, and judged by real clients: a
client over its byte rate is told the throttle time (librdkafka's and kafka-python's own throttle
metrics see it) and keeps working, slower; another client id is not throttled. The rate itself
against a 1 MB/s quota is measured in `make bench` (bench/quota_bench.py), not here."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import trio
from group_helpers import GROUP_BROKER, create_topics

from client.connection import Connection
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow

QUOTA = 10240  # bytes/s: a burst past QUOTA * 10 s (the window) is throttled
CLI = [sys.executable, "-m", "minikafka_cli.main"]


def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "configs", "--bootstrap-server", bootstrap, *args], capture_output=True, text=True, timeout=60
    )


def alter_client(bootstrap: str, client_id: str, *change: str) -> subprocess.CompletedProcess:
    """`configs --alter` of one client id's quotas; `change`: --add-config k=v,... or --delete-config k,..."""
    return configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", client_id, *change)


async def _produce_as(broker, client_id: str, count: int, size: int = 10240) -> list[int]:
    """`count` acks=1 Produce requests of one `size`-byte record each; their throttle times."""
    throttles = []
    async with Connection.open(broker.host, broker.port, client_id=client_id) as conn:
        for _ in range(count):
            body = {
                "acks": 1,
                "timeout_ms": 10000,
                "topic_data": [
                    {"name": "q", "partition_data": [{"index": 0, "records": rb.build_batch([(None, b"x" * size)])}]}
                ],
            }
            response = await conn.request(ApiKey.PRODUCE, body, timeout_s=30)
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            throttles.append(response.throttle_time_ms)
    return throttles


def test_quotas_are_set_described_applied_live_and_obeyed_by_real_clients(start_broker):
    broker = start_broker(1, **GROUP_BROKER, **{"metrics.port": "0", "metrics.host": "127.0.0.1"})
    bootstrap = f"{broker.host}:{broker.port}"
    create_topics(bootstrap, {"q": 1})
    for client in ("slow", "slow-rd", "slow-py"):
        r = alter_client(bootstrap, client, "--add-config", f"producer_byte_rate={QUOTA},consumer_byte_rate={QUOTA}")
        assert r.returncode == 0 and "Completed updating config for client-id" in r.stdout, r.stdout + r.stderr
    r = configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "slow")
    assert f"consumer_byte_rate={QUOTA}, producer_byte_rate={QUOTA}" in r.stdout, r.stdout + r.stderr
    r = configs(bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "x", "--add-config", "nope=1")
    assert r.returncode != 0 and "nope" in r.stderr

    # raw: past QUOTA * 10 s the answers carry a throttle time; another client id's never do
    deadline = time.monotonic() + 30
    while not any(trio.run(_produce_as, broker, "slow", 12)):  # the change reaches the broker first
        assert time.monotonic() < deadline, "the quota was never applied"
    assert not any(trio.run(_produce_as, broker, "fast", 12))

    # librdkafka: 150 KB as a throttled client id, all delivered, and its own statistics saw it
    from confluent_kafka import Producer

    throttle_seen = []

    def stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            throttle_seen.append(b.get("throttle", {}).get("max", 0))

    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "slow-rd", "stats_cb": stats, "statistics.interval.ms": 500}
    )
    errors = []
    for _ in range(150):
        producer.produce("q", b"y" * 1024, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(60) == 0 and not errors
    started = time.monotonic()
    while max(throttle_seen, default=0) == 0 and time.monotonic() - started < 10:
        producer.poll(0.5)
    assert max(throttle_seen) > 0

    # kafka-python: reads everything as a throttled consumer; its fetch-throttle-time metric saw it
    from kafka import KafkaConsumer

    create_topics(bootstrap, {"r": 1})
    fast = Producer({"bootstrap.servers": bootstrap, "client.id": "fast", "batch.size": 4096})  # small batches
    for _ in range(150):
        fast.produce("r", b"z" * 1024)
    assert fast.flush(30) == 0
    consumer = KafkaConsumer(
        "r", bootstrap_servers=bootstrap, client_id="slow-py", auto_offset_reset="earliest", consumer_timeout_ms=30000
    )
    got = 0
    for _ in consumer:
        got += 1
        if got == 150:
            break
    throttle_max = max(  # kafka-python 3 keeps it per connection (throttle-time-max)
        (v for group in consumer.metrics().values() for k, v in group.items() if k.endswith("throttle-time-max")),
        default=0,
    )
    consumer.close()
    assert got == 150
    assert throttle_max > 0
    import urllib.request

    scraped = urllib.request.urlopen(broker.metrics_url, timeout=10).read().decode()

    def metric(name: str, client_id: str) -> float:
        for line in scraped.splitlines():
            if line.startswith(name + "{") and f'client_id="{client_id}"' in line and 'user=""' in line:
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no {name} for {client_id}")

    assert metric("kafka_server_produce_throttled_total", "slow-rd") > 0
    assert metric("kafka_server_fetch_quota", "slow-py") == QUOTA

    # removed: the next requests are not throttled
    r = alter_client(bootstrap, "slow", "--delete-config", "producer_byte_rate,consumer_byte_rate")
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 30
    while any(trio.run(_produce_as, broker, "slow", 3)):
        assert time.monotonic() < deadline, "the quota was never removed"
    assert (
        "consumer_byte_rate"
        not in configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "slow").stdout
    )


def test_a_user_and_client_quota_and_the_default_are_kept_apart(start_broker):
    """AlterClientQuotas entities as kafka-configs.sh names them; DescribeClientQuotas finds each
    exactly; bad entities and keys answer INVALID_REQUEST."""
    broker = start_broker(1)
    bootstrap = f"{broker.host}:{broker.port}"
    both = ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app"]
    assert configs(bootstrap, "--alter", *both, "--add-config", "request_percentage=25.5").returncode == 0
    default = ["--entity-type", "users", "--entity-default"]
    assert configs(bootstrap, "--alter", *default, "--add-config", "producer_byte_rate=1048576").returncode == 0
    assert "request_percentage=25.5" in configs(bootstrap, "--describe", *both).stdout
    described = configs(bootstrap, "--describe", *default).stdout
    assert "user '<default>'" in described and "producer_byte_rate=1048576" in described
    assert "request_percentage" not in described

    async def raw():
        async with Connection.open(broker.host, broker.port) as conn:
            bad = await conn.request(
                ApiKey.ALTER_CLIENT_QUOTAS,
                {
                    "entries": [
                        {"entity": [{"entity_type": "ip", "entity_name": "1.2.3.4"}], "ops": []},
                        {"entity": [], "ops": []},
                        {
                            "entity": [{"entity_type": "user", "entity_name": "u"}],
                            "ops": [{"key": "producer_byte_rate", "value": 1.5, "remove": False}],
                        },
                    ],
                    "validate_only": False,
                },
            )
            listed = await conn.request(
                ApiKey.DESCRIBE_CLIENT_QUOTAS,
                {"components": [{"entity_type": "user", "match_type": 2, "match": None}], "strict": False},
            )
            return bad, listed

    bad, listed = trio.run(raw)
    assert [e.error_code for e in bad.entries] == [ErrorCode.INVALID_REQUEST] * 3
    entities = [{(c.entity_type, c.entity_name) for c in e.entity} for e in listed.entries]
    assert entities == [{("user", "alice"), ("client-id", "app")}]  # SPECIFIED: not the default


def test_the_controller_mutation_quota_refuses_strict_versions_and_throttles_old_ones(start_broker):
    """KIP-599: `controller_mutation_rate` (partitions per second) per client: a burst passes
    once, then CreateTopics v6+ / CreatePartitions v3+ / DeleteTopics v5+ answer
    THROTTLING_QUOTA_EXCEEDED with the throttle time while the rate is over; older versions are
    served and told the throttle time."""
    broker = start_broker(1)
    bootstrap = f"{broker.host}:{broker.port}"
    r = alter_client(bootstrap, "terraform", "--add-config", "controller_mutation_rate=1")
    assert r.returncode == 0, r.stderr

    def create(name: str, partitions: int) -> dict:
        return {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, "configs": []}],
            "timeout_ms": 10000,
        }

    async def go():
        async with (
            Connection.open(broker.host, broker.port, client_id="terraform") as conn,
            Connection.open(broker.host, broker.port, client_id="terraform") as strict,
        ):
            deadline = trio.current_time() + 30
            while True:  # the burst passes; once the quota is in force, the next is refused
                burst = f"t{int(trio.current_time() * 1000)}"
                first = await conn.request(ApiKey.CREATE_TOPICS, create(burst, 30))
                assert first.topics[0].error_code == ErrorCode.NONE
                if first.throttle_time_ms > 0:
                    break
                assert trio.current_time() < deadline, "the quota was never applied"
            # `conn` is muted for the throttle time (KIP-219), which lasts until the rate is back
            # at the quota: a request read after it is at the boundary. The strict requests go on
            # another connection of the same client at once, while the rate is over the quota.
            refused = await strict.request(ApiKey.CREATE_TOPICS, create("refused", 5), version=7)
            deleted = await strict.request(
                ApiKey.DELETE_TOPICS, {"topic_names": [burst], "timeout_ms": 10000}, version=5
            )
            old = await conn.request(ApiKey.CREATE_TOPICS, create("permitted", 30), version=5)
        async with Connection.open(broker.host, broker.port, client_id="other") as conn:
            other = await conn.request(ApiKey.CREATE_TOPICS, create("other", 30), version=7)
        return refused, old, deleted, other

    refused, old, deleted, other = trio.run(go)
    assert refused.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED and refused.throttle_time_ms > 0
    assert old.topics[0].error_code == ErrorCode.NONE and old.throttle_time_ms > 0
    assert deleted.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert other.topics[0].error_code == ErrorCode.NONE and other.throttle_time_ms == 0


def test_the_request_quota_throttles_a_client_using_more_than_its_share_of_handler_time(start_broker):
    """KIP-124: `request_percentage` = the share of one thread a client's requests may use
    (handler time, measured per request task); past it the answers carry a throttle time."""
    broker = start_broker(1)
    bootstrap = f"{broker.host}:{broker.port}"
    r = alter_client(bootstrap, "busy", "--add-config", "request_percentage=0.5")
    assert r.returncode == 0, r.stderr

    async def hammer(client_id: str, count: int) -> int:
        """Requests until one is throttled; how many it took (count + 1 if none was)."""
        async with Connection.open(broker.host, broker.port, client_id=client_id) as conn:
            for i in range(count):
                body = {"resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": None}]}
                response = await conn.request(ApiKey.DESCRIBE_CONFIGS, {**body, "include_synonyms": True}, version=3)
                if response.throttle_time_ms > 0:
                    return i
        return count + 1

    deadline = time.monotonic() + 60
    while (took := trio.run(hammer, "busy", 3000)) > 3000:
        assert time.monotonic() < deadline, "never throttled"
    assert took < 3000
    assert trio.run(hammer, "idle", 300) == 301  # another client id: never throttled
