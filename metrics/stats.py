"""The counters a broker updates as it works, kept as plain numbers (no locks, no I/O: everything
runs on the broker's trio thread) and read by `collector.py` at scrape time. Names follow Kafka's
MBeans: kafka.network:type=RequestMetrics, kafka.server:type=BrokerTopicMetrics,
kafka.server:type=ReplicaManager and kafka.controller:type=ControllerStats."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

#: request latency bucket bounds, ms (Prometheus histogram `le`, +Inf implied)
LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


@dataclass
class Histogram:
    """Cumulative-at-read histogram: `counts[i]` requests took <= LATENCY_BUCKETS_MS[i] (and
    more than the bound before); the last slot is above every bound."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    total_ms: float = 0.0
    count: int = 0

    def observe(self, ms: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS_MS, ms)] += 1
        self.total_ms += ms
        self.count += 1


def error_codes(body, out: dict[int, int]) -> None:
    """Count every non-zero `*error_code` field of a response body (dicts and lists of them), as
    Kafka's AbstractResponse.errorCounts does for ErrorsPerSec."""
    if isinstance(body, dict):
        for key, value in body.items():
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, dict):
                        error_codes(item, out)
            elif isinstance(value, int) and value and key.endswith("error_code"):
                out[value] = out.get(value, 0) + 1


def _produce_error_codes(body, out: dict[int, int]) -> None:
    """`error_codes` of a Produce response (its only error codes are the partitions')."""
    for topic in body["responses"]:
        for p in topic["partition_responses"]:
            code = p["error_code"]
            if code:
                out[code] = out.get(code, 0) + 1


def _fetch_error_codes(body, out: dict[int, int]) -> None:
    """`error_codes` of a Fetch response (the top-level code and the partitions')."""
    code = body.get("error_code", 0)
    if code:
        out[code] = out.get(code, 0) + 1
    for topic in body["responses"]:
        for p in topic["partitions"]:
            code = p["error_code"]
            if code:
                out[code] = out.get(code, 0) + 1


#: the two APIs of nearly every request, counted without the generic walk (per request, it was
#: a visible share of a small Produce); bodies with other shapes still take the generic walk
_SHAPED = {0: (_produce_error_codes, frozenset(("responses", "throttle_time_ms"))),
           1: (_fetch_error_codes, frozenset(("responses", "throttle_time_ms", "error_code", "session_id")))}  # fmt: skip


def count_error_codes(api_key: int, body, out: dict[int, int]) -> None:
    """`error_codes` of a response body of `api_key`: Produce and Fetch bodies of the usual shape
    by their own short walk, everything else by the generic one."""
    shaped = _SHAPED.get(api_key)
    if shaped is not None and isinstance(body, dict) and body.keys() <= shaped[1]:
        try:
            shaped[0](body, out)
            return
        except (KeyError, TypeError):
            out.clear()
    error_codes(body, out)


@dataclass
class RequestStats:
    """kafka.network:type=RequestMetrics: RequestsPerSec{request,version}, ErrorsPerSec{request,
    error} and TotalTimeMs{request} (from the request's arrival to its response's encoding)."""

    requests: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    errors: dict[tuple[int, int], int] = field(default_factory=lambda: defaultdict(int))
    total_time: dict[int, Histogram] = field(default_factory=lambda: defaultdict(Histogram))

    def record(self, api_key: int, version: int, ms: float, body) -> None:
        self.requests[(api_key, version)] += 1
        self.total_time[api_key].observe(ms)
        found: dict[int, int] = {}
        count_error_codes(api_key, body, found)
        for code, n in found.items():
            self.errors[(api_key, code)] += n


@dataclass
class BrokerTopicStats:
    """kafka.server:type=BrokerTopicMetrics per topic: BytesInPerSec, MessagesInPerSec,
    BytesOutPerSec (consumers) and ReplicationBytesOutPerSec (followers); counts since start."""

    bytes_in: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    messages_in: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_out: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    replication_bytes_out: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def appended(self, topic: str, size: int, records: int) -> None:
        self.bytes_in[topic] += size
        self.messages_in[topic] += records

    def fetched(self, reads: list, follower: bool) -> None:
        """Count the record bytes of a fetch's reads: (topic, [FetchPartitionData]) pairs."""
        out = self.replication_bytes_out if follower else self.bytes_out
        for topic, parts in reads:
            size = sum(len(p.records) for p in parts)
            if size:
                out[topic] += size


@dataclass
class ReplicaStats:
    """kafka.server:type=ReplicaManager IsrShrinksPerSec / IsrExpandsPerSec (committed changes)."""

    isr_shrinks: int = 0
    isr_expands: int = 0


@dataclass
class ControllerStats:
    """kafka.controller:type=ControllerStats LeaderElectionRateAndTimeMs (count),
    UncleanLeaderElectionsPerSec and IsrChangeRateAndTimeMs (count: ISR change notification
    events processed), counted by this broker while it is the controller."""

    leader_elections: int = 0
    unclean_leader_elections: int = 0
    isr_change_events: int = 0
