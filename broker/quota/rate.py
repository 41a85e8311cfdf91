"""A windowed rate, as Kafka's metrics measure quotas (`org.apache.kafka.common.metrics.stats.Rate`
over a `SampledStat`): `samples` windows of `window_ms` each (`quota.window.num`, default 11, and
`quota.window.size.seconds`, default 1). Pure: every call takes the time (ms, one monotonic clock).

The rate is the total of the samples not older than `samples * window_ms`, divided by the elapsed
window: the time since the oldest live sample began, but at least `samples - 1` whole windows (so a
client's first burst is spread over the full window, as Kafka does).
"""

from __future__ import annotations


class WindowedRate:
    __slots__ = ("samples", "window_ms", "_starts", "_values")

    def __init__(self, samples: int = 11, window_ms: int = 1000):
        if samples < 2 or window_ms <= 0:
            raise ValueError("a windowed rate needs at least 2 samples of a positive window")
        self.samples, self.window_ms = samples, window_ms
        self._starts: list[float] = []  # each live sample's start (ms), oldest first
        self._values: list[float] = []

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.samples * self.window_ms
        while self._starts and self._starts[0] + self.window_ms <= horizon:
            self._starts.pop(0)
            self._values.pop(0)

    def record(self, value: float, now_ms: float) -> None:
        """Add `value` (bytes, or ms of handler time) at `now_ms`."""
        self._purge(now_ms)
        if not self._starts or now_ms >= self._starts[-1] + self.window_ms:
            self._starts.append(now_ms)
            self._values.append(0.0)
            if len(self._starts) > self.samples:
                self._starts.pop(0)
                self._values.pop(0)
        self._values[-1] += value

    def window_size_ms(self, now_ms: float) -> float:
        """The elapsed window the rate is measured over (Kafka's `Rate.windowSize`)."""
        self._purge(now_ms)
        elapsed = now_ms - self._starts[0] if self._starts else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        """Units per second over the window."""
        self._purge(now_ms)
        return sum(self._values) * 1000.0 / self.window_size_ms(now_ms)

    def throttle_ms(self, bound: float, now_ms: float) -> float:
        """How long a client over `bound` (units/s) must wait to bring the rate back to it
        (Kafka's `QuotaUtils.throttleTime`): (rate - bound) / bound * window; 0 when within."""
        rate = self.rate(now_ms)
        if rate <= bound or bound <= 0:
            return 0.0
        return (rate - bound) / bound * self.window_size_ms(now_ms)

    def unrecord(self, value: float, now_ms: float) -> None:
        """Take back the last `value` recorded (a throttled fetch returned nothing)."""
        if self._values:
            self._values[-1] = max(0.0, self._values[-1] - value)
