"""`make bench`, client metrics part (issue 47's targets, KIP-714), on one real broker process:

1. Pushes: `CLIENTS` client instances, each on its own connection, subscribed to every metric
   at a 1 s interval, each pushing a payload shaped like librdkafka 2.16's producer push (the ten
   `org.apache.kafka.producer.` metrics it sends, with a node id attribute for each of three
   brokers, zstd-compressed) once a second for `SECONDS`. Reported: the broker's CPU for it, as
   a share of one core (its idle CPU over the same time subtracted), and per push. Target: 100
   clients pushing every second cost at most 2% of one core.
2. Memory: `INSTANCES` distinct client instance ids ask for their subscription and push once,
   three times over (30,000 ids with the default `telemetry.max.client.instances` of 10,000);
   the broker's resident memory after each round. Target: flat (the last round within 5% of
   the first), the ids past the bound dropped and counted.

Results: a markdown table (measured vs target) printed, written to `bench/results/telemetry.md`
and (unless --quick) copied into docs/benchmarks.md between the `bench:telemetry` markers.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path

import cramjam
import trio
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from bench import targets
from bench.consumer_group_bench import cpu_seconds
from client import Cluster
from client import client_metrics as cm
from client.connection import Connection
from local_cluster.brokers import BrokerProcess
from local_cluster.zookeeper import ZooKeeperProcess
from protocol.api_keys import ApiKey

CLIENTS, SECONDS, INSTANCES = 100, 10, 10_000
ZERO = uuid.UUID(int=0)
ZSTD = 4
#: the producer metrics librdkafka 2.16 pushes (seen in tests/cluster/test_client_metrics.py)
LIBRDKAFKA_PRODUCER = [
    "connection.creation.rate",
    "connection.creation.total",
    "node.request.latency.avg",
    "node.request.latency.max",
    "produce.throttle.time.avg",
    "produce.throttle.time.max",
    "record.queue.time.avg",
    "record.queue.time.max",
    "request.latency.avg",
    "request.latency.max",
]


def payload() -> bytes:
    data = metrics_pb2.MetricsData()
    resource = data.resource_metrics.add()
    scope = resource.scope_metrics.add()
    for name in LIBRDKAFKA_PRODUCER:
        metric = scope.metrics.add(name="org.apache.kafka.producer." + name)
        for node in ("1", "2", "3") if name.startswith("node.") else ("",):
            point = metric.gauge.data_points.add(as_double=1.5, time_unix_nano=time.time_ns())
            if node:
                point.attributes.append(
                    common_pb2.KeyValue(key="node.id", value=common_pb2.AnyValue(string_value=node))
                )
    return bytes(cramjam.zstd.compress(data.SerializeToString()))


def _push(subscribed, body: bytes) -> dict:
    """A PushTelemetry body for the instance a GetTelemetrySubscriptions answer named."""
    return {
        "client_instance_id": subscribed.client_instance_id,
        "subscription_id": subscribed.subscription_id,
        "terminating": False,
        "compression_type": ZSTD,
        "metrics": body,
    }


async def _subscribe(bootstrap: str) -> None:
    async with Cluster.open(bootstrap) as cluster:
        await cm.alter_subscription(cluster, "all", {"metrics": "*", "interval.ms": "1000"})


async def _client(host: str, port: int, body: bytes, seconds: float, pushes: list[int]) -> None:
    async with Connection.open(host, port, client_id="bench-producer") as conn:
        got = await conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO})
        push = _push(got, body)
        end = trio.current_time() + seconds
        while trio.current_time() < end:
            r = await conn.request(ApiKey.PUSH_TELEMETRY, push)
            pushes[r.error_code == 0] += 1
            await trio.sleep(1.0)


async def pushing(host: str, port: int, clients: int, seconds: float) -> list[int]:
    """[refused, accepted] pushes of `clients` clients pushing every second for `seconds`."""
    pushes = [0, 0]
    body = payload()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(_client, host, port, body, seconds, pushes)
            await trio.sleep(1.0 / clients)  # spread over the second, as independent clients are
    return pushes


async def many_instances(host: str, port: int, count: int) -> None:
    body = payload()
    async with Connection.open(host, port, client_id="bench-many") as conn:
        for _ in range(count):
            got = await conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO})
            if got.error_code == 0:
                await conn.request(ApiKey.PUSH_TELEMETRY, _push(got, body))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def run(quick: bool) -> list[targets.Row]:
    clients, seconds, instances = (10, 3, 500) if quick else (CLIENTS, SECONDS, INSTANCES)
    rows: list[targets.Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        zk = ZooKeeperProcess.start(root / "zk")
        try:
            # long-lived instances for the memory rounds: the bound, not ageing, must hold them
            broker = BrokerProcess.create(1, root / "b", zk.connect + "/tb", 0).start()
            assert broker.process is not None
            pid = broker.process.pid
            trio.run(_subscribe, broker.bootstrap)
            before = cpu_seconds(pid)
            time.sleep(seconds)
            idle = cpu_seconds(pid) - before
            before = cpu_seconds(pid)
            refused, accepted = trio.run(pushing, broker.host, broker.port, clients, seconds)
            used = cpu_seconds(pid) - before - idle
            share = max(used, 0.0) / seconds
            rows.append(
                (
                    f"{clients} clients pushing every second ({len(payload())} B zstd payloads, {accepted} accepted, "
                    f"{refused} refused)",
                    f"{share:.2%} of a core ({max(used, 0.0) / max(accepted, 1) * 1e6:.0f} µs per push)",
                    "<= 2% of a core",
                    share <= 0.02 if clients == CLIENTS else None,
                )
            )
            sizes = []
            for _ in range(3):
                trio.run(many_instances, broker.host, broker.port, instances)
                sizes.append(rss_mb(pid))
            flat = sizes[-1] <= sizes[0] * 1.05
            rows.append(
                (
                    f"broker RSS after 1, 2 and 3 x {instances:,} distinct client instance ids",
                    " / ".join(f"{s:.0f} MB" for s in sizes),
                    "flat (last within 5% of first)",
                    flat if not quick else None,
                )
            )
            broker.kill()
        finally:
            zk.stop()
    return rows


def main(argv=None) -> int:
    return targets.main(argv, __doc__.splitlines()[0], run, 47, "telemetry")


if __name__ == "__main__":
    raise SystemExit(main())
