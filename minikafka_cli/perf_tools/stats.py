"""What every perf driver reports, and how it paces itself (no I/O here).

`Result` is one measurement: records and bytes moved in `seconds`, with latency percentiles (ms)
when the driver measured them. `Result.line()` prints it in the shape of Kafka's own perf tools
(`kafka-producer-perf-test`: "N records sent, R records/sec (M MB/sec), ... ms avg latency, ...");
`Result.to_json()` is what `make bench` reads back from a `minikafka perf ... --json` child.

`Throttler` is Kafka's `ThroughputThrottler` rule: after `sent` records in `elapsed_s`, sleep
until `sent / target` seconds have passed, so the average rate never exceeds `target` records/s,
but only once at least MIN_SLEEP_S is owed (Kafka's MIN_SLEEP_NS, 2 ms): a sender runs up to
2 ms ahead, then sleeps, instead of spinning on sleeps shorter than the clock can give.
"""

from __future__ import annotations

import json
import math
import resource
from dataclasses import asdict, dataclass, field

MB = 1024 * 1024  # Kafka's perf tools divide by 1024 * 1024 for "MB/sec"


@dataclass(frozen=True)
class Latency:
    """Latency summary in milliseconds over `count` samples."""

    count: int
    avg: float
    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, samples_ms: list[float]) -> Latency | None:
        """Summary of `samples_ms` (None when empty). Percentiles are nearest-rank, as Kafka's
        perf tools compute them (sorted sample at index ceil(q * n) - 1)."""
        if not samples_ms:
            return None
        s = sorted(samples_ms)
        return cls(len(s), sum(s) / len(s), percentile(s, 0.50), percentile(s, 0.95), percentile(s, 0.99), s[-1])


def percentile(sorted_samples: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending, non-empty list; q in (0, 1]."""
    if not sorted_samples:
        raise ValueError("no samples")
    if not 0 < q <= 1:
        raise ValueError(f"quantile {q} is not in (0, 1]")
    return sorted_samples[max(0, math.ceil(q * len(sorted_samples)) - 1)]


@dataclass
class Result:
    """One perf run. `kind`: produce, consume or end-to-end; `client`: ours or confluent.
    `latency`: per-record send-to-ack (produce), per-fetch (consume) or produce-to-consume
    (end-to-end) latency; `extra`: driver-specific facts (e.g. verified log end offsets)."""

    kind: str
    client: str
    records: int
    bytes: int
    seconds: float
    latency: Latency | None = None
    errors: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        verb = {"produce": "sent", "consume": "consumed", "end-to-end": "sent and consumed"}[self.kind]
        text = (
            f"{self.records} records {verb}, {self.records_per_s:.1f} records/sec "
            f"({self.mb_per_s:.2f} MB/sec) in {self.seconds:.2f} s"
        )
        if self.latency is not None:
            what = {"produce": "latency", "consume": "fetch latency", "end-to-end": "end-to-end latency"}[self.kind]
            lat = self.latency
            text += (
                f", {what} ms: {lat.avg:.2f} avg, {lat.p50:.2f} p50, {lat.p95:.2f} p95, "
                f"{lat.p99:.2f} p99, {lat.max:.2f} max ({lat.count} samples)"
            )
        if self.errors:
            text += f", {self.errors} errors"
        return text

    def to_json(self) -> str:
        d = asdict(self)
        d["records_per_s"], d["mb_per_s"] = self.records_per_s, self.mb_per_s
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> Result:
        d = json.loads(text)
        d.pop("records_per_s", None)
        d.pop("mb_per_s", None)
        latency = d.pop("latency")
        return cls(latency=Latency(**latency) if latency else None, **d)


def process_cpu_s() -> float:
    """CPU seconds (user + system) this process has used so far, all threads (librdkafka's too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


MIN_SLEEP_S = 0.002  # ThroughputThrottler.MIN_SLEEP_NS


class Throttler:
    """Paces a sender to `target` records/s; `target` <= 0 means unlimited."""

    def __init__(self, target: float):
        self.target = target

    def delay_s(self, sent: int, elapsed_s: float) -> float:
        """Seconds to sleep now, after `sent` records in `elapsed_s` seconds: 0 when behind,
        unlimited, or less than MIN_SLEEP_S ahead (send on; the sleep comes once it is due)."""
        if self.target <= 0:
            return 0.0
        ahead = sent / self.target - elapsed_s
        return ahead if ahead >= MIN_SLEEP_S else 0.0


def sample_every(num_records: int, max_samples: int = 100_000) -> int:
    """Record one latency sample every this many records, so at most about `max_samples` are
    kept (Kafka's producer perf test samples the same way)."""
    return max(1, num_records // max_samples)
