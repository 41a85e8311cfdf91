"""Pushed metrics (KIP-714's PushTelemetry `Metrics`): OpenTelemetry `MetricsData` v1 protobuf,
compressed with one of the record batch codecs, decoded with `opentelemetry-proto`'s classes.

`decode(codec, payload, max_bytes)` -> the samples: (metric name, data point attributes, value)
for every gauge and sum data point (a histogram or summary gives its count and sum as
`<name>.count` / `<name>.sum`). Raises `MalformedMetrics` for a payload that does not decompress,
decompresses past `max_bytes` x `MAX_EXPANSION`, or is not `MetricsData`.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2

from protocol import record_batch as rb
from protocol.errors import CorruptRecordBatch, UnsupportedCompression

MAX_EXPANSION = 20  # a decompressed payload may be this many times telemetry.max.bytes at most

Sample = tuple[str, tuple[tuple[str, str], ...], float]


class MalformedMetrics(ValueError):
    pass


def _value(point) -> float:
    return float(point.as_double) if point.WhichOneof("value") == "as_double" else float(point.as_int)


def _attributes(point) -> tuple[tuple[str, str], ...]:
    out = []
    for kv in point.attributes:
        kind = kv.value.WhichOneof("value")
        out.append((kv.key, str(getattr(kv.value, kind)) if kind else ""))
    return tuple(sorted(out))


def decode(codec: int, payload: bytes, max_bytes: int) -> list[Sample]:
    try:
        raw = rb.decompress(codec, payload)
    except (CorruptRecordBatch, UnsupportedCompression) as e:
        raise MalformedMetrics(str(e)) from None
    if len(raw) > max_bytes * MAX_EXPANSION:
        raise MalformedMetrics(f"decompressed metrics of {len(raw)} bytes")
    data = metrics_pb2.MetricsData()
    try:
        data.ParseFromString(raw)
    except DecodeError as e:
        raise MalformedMetrics(f"not OTLP MetricsData: {e}") from None
    samples: list[Sample] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                if kind in ("gauge", "sum"):
                    for point in getattr(metric, kind).data_points:
                        samples.append((metric.name, _attributes(point), _value(point)))
                elif kind in ("histogram", "exponential_histogram", "summary"):
                    for point in getattr(metric, kind).data_points:
                        labels = _attributes(point)
                        samples.append((metric.name + ".count", labels, float(point.count)))
                        samples.append((metric.name + ".sum", labels, float(point.sum)))
    return samples
