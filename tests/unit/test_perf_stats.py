"""minikafka_cli/perf_tools/stats.py: percentiles, latency summaries, pacing and the JSON hand-over to `make bench`."""

import pytest

from minikafka_cli.perf_tools.stats import Latency, Result, Throttler, percentile, sample_every


def test_nearest_rank_percentiles():
    samples = [float(x) for x in range(1, 101)]  # 1..100
    assert [percentile(samples, q) for q in (0.5, 0.95, 0.99, 1.0)] == [50.0, 95.0, 99.0, 100.0]
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([1.0, 2.0, 3.0], 0.5) == 2.0
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 0.0)


def test_latency_summary_sorts_and_averages():
    lat = Latency.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (lat.count, lat.avg, lat.p50, lat.max) == (5, 3.0, 3.0, 5.0)
    assert Latency.of([]) is None


def test_throttler_holds_the_average_rate():
    t = Throttler(1000)  # 1000 records/s
    assert t.delay_s(10, 0.0) == pytest.approx(0.010)
    assert t.delay_s(10, 0.010) == 0.0
    assert t.delay_s(10, 0.5) == 0.0  # behind schedule: no sleep
    assert Throttler(-1).delay_s(10**9, 0.0) == 0.0


def test_throttler_sleeps_only_once_two_ms_are_owed():
    t = Throttler(10_000)  # a record every 100 µs: sleeping each gap would spin on sub-ms sleeps
    assert t.delay_s(10, 0.0) == 0.0  # 1 ms ahead: send on
    assert t.delay_s(19, 0.0) == 0.0
    assert t.delay_s(20, 0.0) == pytest.approx(0.002)  # 2 ms owed: sleep it all
    assert t.delay_s(30, 0.001) == pytest.approx(0.002)


def test_sampling_keeps_at_most_about_the_cap():
    assert sample_every(1000) == 1
    assert sample_every(10_000_000, max_samples=100_000) == 100


def test_result_rates_line_and_json_round_trip():
    r = Result(
        "produce", "confluent", 2_000_000, 200_000_000, 4.0, Latency.of([1.0, 2.0, 30.0]), 0, {"not_delivered": 0}
    )
    assert r.records_per_s == 500_000
    assert r.mb_per_s == pytest.approx(200_000_000 / 1048576 / 4)
    assert r.line().startswith("2000000 records sent, 500000.0 records/sec (47.68 MB/sec) in 4.00 s, latency ms:")
    assert "30.00 max (3 samples)" in r.line()
    back = Result.from_json(r.to_json())
    assert back == r
    assert Result.from_json(Result("consume", "ours", 0, 0, 0.0).to_json()).records_per_s == 0.0
