"""Reading a broker's metrics back (for `minikafka cluster status`): one scrape of its `/metrics`
parsed with prometheus_client's parser, and the health numbers an operator looks at first."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str, timeout_s: float = 5.0) -> dict[str, float]:
    """{sample name: value summed over its labels} of one scrape. Raises OSError (URLError) if
    the endpoint does not answer."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        text = response.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


@dataclass(frozen=True)
class BrokerHealth:
    active_controller: bool
    offline_partitions: int  # as the active controller counts them (0 on the others)
    leaders: int
    under_replicated: int
    under_min_isr: int
    isr_shrinks: int
    isr_expands: int
    bytes_in: int
    bytes_out: int
    requests: int

    @classmethod
    def of(cls, totals: dict[str, float]) -> BrokerHealth:
        def get(name: str) -> int:
            return int(totals.get(name, 0))

        return cls(
            active_controller=get("kafka_controller_kafkacontroller_activecontrollercount") == 1,
            offline_partitions=get("kafka_controller_kafkacontroller_offlinepartitionscount"),
            leaders=get("kafka_server_replicamanager_leadercount"),
            under_replicated=get("kafka_server_replicamanager_underreplicatedpartitions"),
            under_min_isr=get("kafka_server_replicamanager_underminisrpartitioncount"),
            isr_shrinks=get("kafka_server_replicamanager_isrshrinks_total"),
            isr_expands=get("kafka_server_replicamanager_isrexpands_total"),
            bytes_in=get("kafka_server_brokertopicmetrics_bytesin_total"),
            bytes_out=get("kafka_server_brokertopicmetrics_bytesout_total"),
            requests=get("kafka_network_requestmetrics_requests_total"),
        )

    def summary(self) -> str:
        role = "active controller, " if self.active_controller else ""
        offline = f"{self.offline_partitions} offline, " if self.active_controller else ""
        return (
            f"{role}{self.leaders} leaders, {self.under_replicated} under-replicated, "
            f"{self.under_min_isr} under min ISR, {offline}ISR shrinks {self.isr_shrinks} / expands "
            f"{self.isr_expands}, {self.bytes_in:,} B in, {self.bytes_out:,} B out, {self.requests:,} requests"
        )
