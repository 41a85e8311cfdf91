"""A prometheus_client collector for KIP-714's pushed client metrics (`client_metrics/`): the
latest value of every series each client instance pushed, and the broker's own counts.

| metric | meaning |
|---|---|
| `<otlp name, dots as underscores>{client_instance_id, client_id, client_software_name, client_software_version, principal, <data point attributes>}` | the latest pushed value (gauge) |
| kafka_server_client_metrics_instance_count | client instances known (ClientMetricsManager instance-count) |
| kafka_server_client_metrics_push_total | pushes accepted |
| kafka_server_client_metrics_push_refused_total{error} | pushes refused, by Kafka error |
| kafka_server_client_metrics_dropped_series_total, _dropped_instances_total | past the broker's bounds |

A series' labels are the union of its metric's data point attributes (absent ones are "").
"""

from __future__ import annotations

import re

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from metrics.collector import error_name

CLIENT_LABELS = ["client_instance_id", "client_id", "client_software_name", "client_software_version", "principal"]
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(name: str) -> str:
    out = _NOT_NAME.sub("_", name)
    return out if out and not out[0].isdigit() else "_" + out


class ClientMetricsCollector:
    def __init__(self, manager) -> None:
        self.manager = manager

    def collect(self):
        m = self.manager  # silent instances are forgotten by the broker's timer, not by a scrape
        by_name: dict[str, list] = {}
        for instance in m.views():
            client = instance.client
            fixed = [str(instance.instance_id), client.client_id, client.client_software_name,
                     client.client_software_version, instance.principal]  # fmt: skip
            for (name, attributes), value in instance.series.items():
                by_name.setdefault(prometheus_name(name), []).append((fixed, dict(attributes), value))
        for name, rows in sorted(by_name.items()):
            extra = sorted({prometheus_name(k) for _, attrs, _ in rows for k in attrs} - set(CLIENT_LABELS))
            family = GaugeMetricFamily(name, "Pushed by the client (KIP-714)", labels=CLIENT_LABELS + extra)
            for fixed, attrs, value in rows:
                named = {prometheus_name(k): v for k, v in attrs.items()}
                family.add_metric(fixed + [named.get(k, "") for k in extra], value)
            yield family
        yield GaugeMetricFamily(
            "kafka_server_client_metrics_instance_count", "Client instances", value=len(m.instances)
        )
        yield CounterMetricFamily("kafka_server_client_metrics_push", "Pushes accepted", value=m.pushes)
        refused = CounterMetricFamily("kafka_server_client_metrics_push_refused", "Pushes refused", labels=["error"])
        for code, n in sorted(m.refused.items()):
            refused.add_metric([error_name(code)], n)
        yield refused
        yield CounterMetricFamily(
            "kafka_server_client_metrics_dropped_series", "Series past telemetry.max.series", value=m.dropped_series
        )
        yield CounterMetricFamily(
            "kafka_server_client_metrics_dropped_instances",
            "Instances past telemetry.max.client.instances",
            value=m.dropped_instances,
        )
