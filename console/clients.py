"""The console's Clients page (KIP-714): every client connected to a broker of the cluster, and
the metrics each client instance pushed.

`clients_snapshot(server, client_metrics)` is this broker's part of `/api/local.json`:
    {"connections": [{"connection_id", "client_id", "software_name", "software_version",
                      "principal", "address", "listener"}],
     "pushing": [{"instance_id", "client_id", "software_name", "software_version", "principal",
                  "address", "interval_ms", "last_push_ms" (wall clock ms, or null),
                  "metrics": {name: value}}]}   # the headline metrics in `SHOWN`, summed over series
`page(view)` renders every broker's part (`ClusterView.snapshots`).
"""

from __future__ import annotations

import time

from console import pages

#: headline metrics (KIP-714 names) and their column titles; librdkafka 2.16 pushes the latency,
#: queue time and throttle ones, Kafka's Java clients also the send rate and lag
SHOWN = {
    "org.apache.kafka.producer.request.latency.avg": "produce latency avg (ms)",
    "org.apache.kafka.producer.record.queue.time.avg": "queue time avg (ms)",
    "org.apache.kafka.producer.record.send.rate": "records sent/s",
    "org.apache.kafka.producer.produce.throttle.time.avg": "produce throttle avg (ms)",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg": "fetch latency avg (ms)",
    "org.apache.kafka.consumer.coordinator.commit.latency.avg": "commit latency avg (ms)",
    "org.apache.kafka.consumer.fetch.manager.records.lag.max": "lag max",
    "org.apache.kafka.consumer.fetch.manager.fetch.throttle.time.avg": "fetch throttle avg (ms)",
}


def clients_snapshot(server, client_metrics) -> dict:
    connections = []
    for s in list(server.sessions.values()) if server is not None else []:
        connections.append(
            {
                "connection_id": s.connection_id,
                "client_id": s.client_id,
                "software_name": s.software[0],
                "software_version": s.software[1],
                "principal": s.principal,
                "address": s.peer,
                "listener": s.listener,
            }
        )
    pushing = []
    if client_metrics is not None:
        now_wall, now = time.time() * 1000, client_metrics.now_ms()
        for inst in client_metrics.views():
            c = inst.client
            shown: dict[str, float] = {}
            for (name, _labels), value in inst.series.items():
                if name in SHOWN:
                    shown[name] = shown.get(name, 0.0) + value
            pushing.append(
                {
                    "instance_id": str(inst.instance_id),
                    "client_id": c.client_id,
                    "software_name": c.client_software_name,
                    "software_version": c.client_software_version,
                    "principal": inst.principal,
                    "address": f"{c.client_source_address}:{c.client_source_port}",
                    "interval_ms": inst.interval_ms,
                    "last_push_ms": None if inst.last_push_ms is None else int(now_wall - (now - inst.last_push_ms)),
                    "metrics": shown,
                }
            )
    return {"connections": connections, "pushing": pushing}


def _software(entry: dict) -> str:
    """A client's software name and version (ApiVersions v3+), "-" when it sent none."""
    return f"{entry['software_name']} {entry['software_version']}".strip() or "-"


def page(view) -> str:
    esc = pages.esc
    connected, pushed = [], []
    for broker_id, snapshot in sorted(view.snapshots.items()):
        part = snapshot.get("clients") or {"connections": [], "pushing": []}
        for c in part["connections"]:
            connected.append(
                [
                    esc(c["client_id"] or "-"),
                    esc(_software(c)),
                    esc(c["principal"]),
                    esc(c["address"]),
                    esc(c["listener"]),
                    esc(broker_id),
                ]  # fmt: skip
            )
        for p in part["pushing"]:
            values = [esc(_number(p["metrics"].get(name))) for name in SHOWN]
            last = pages.when(p["last_push_ms"]) if p["last_push_ms"] is not None else "never"
            pushed.append(
                [
                    esc(p["client_id"] or "-"),
                    esc(_software(p)),
                    esc(p["instance_id"]),
                    esc(p["principal"]),
                    esc(p["address"]),
                    esc(broker_id),
                    *values,
                    esc(last),
                ]  # fmt: skip
            )
    body = "<h2>Connected</h2>" + pages.table(
        ["client id", "software", "principal", "address", "listener", "broker"], connected
    )
    body += "<h2>Pushed metrics (KIP-714)</h2>"
    if pushed:
        headers = ["client id", "software", "instance id", "principal", "address", "pushes to", *SHOWN.values()]
        body += pages.table([*headers, "last push"], pushed)
    else:
        body += (
            "<p>No client pushes metrics: add a subscription with <code>minikafka client-metrics --alter</code>.</p>"
        )
    return pages.page("Clients", body, view)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"
