"""A broker's Prometheus endpoint (`metrics.port`) read as the tests read it."""

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(broker) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of one scrape."""
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
