"""broker.quota: the windowed rate, Kafka's quota precedence and throttle times (pure, no I/O)."""

import pytest

from broker.quota.entities import config_path, from_change, from_components
from broker.quota.manager import DEFAULT, ClientQuotaManager, QuotaManagers
from broker.quota.rate import WindowedRate


def test_a_first_burst_is_spread_over_the_whole_window():
    rate = WindowedRate(samples=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000  # (samples - 1) whole windows at least
    assert rate.rate(0) == pytest.approx(1000.0)
    # at 1,000 units/s against a bound of 500: wait (1000 - 500) / 500 * 10 s = 10 s
    assert rate.throttle_ms(500, 0) == pytest.approx(10_000)
    assert rate.throttle_ms(2000, 0) == 0


def test_old_samples_expire():
    rate = WindowedRate(samples=3, window_ms=1000)
    rate.record(3000, now_ms=0)
    rate.record(0, now_ms=5000)
    assert rate.rate(5000) == 0.0


def test_kafkas_precedence_and_shared_sensors():
    quota = ClientQuotaManager("Produce", samples=11, window_ms=1000)
    assert quota.quota_for("alice", "app") is None and quota.record("alice", "app", 1e9, 0) == 0
    quota.set_quota((None, DEFAULT), 100)
    assert quota.quota_for("bob", "x") == (100, ("", "x"))  # each client id its own sensor
    quota.set_quota((None, "app"), 200)
    assert quota.quota_for("bob", "app") == (200, ("", "app"))
    quota.set_quota((DEFAULT, None), 300)
    assert quota.quota_for("bob", "app") == (300, ("bob", ""))  # user level: shared by bob's clients
    quota.set_quota(("alice", None), 400)
    quota.set_quota(("alice", DEFAULT), 500)
    assert quota.quota_for("alice", "other") == (500, ("alice", "other"))
    quota.set_quota(("alice", "app"), 600)
    assert quota.quota_for("alice", "app") == (600, ("alice", "app"))
    quota.set_quota(("alice", "app"), None)
    assert quota.quota_for("alice", "app") == (500, ("alice", "app"))


def test_throttle_is_answered_over_the_quota_and_capped_at_the_window():
    quota = ClientQuotaManager("Produce", samples=11, window_ms=1000)
    quota.set_quota((None, "slow"), 1000)
    assert quota.record("u", "slow", 5_000, 0) == 0  # 500/s over the 10 s minimum window
    throttle = quota.record("u", "slow", 10_000, 0)  # 1,500/s: (1500 - 1000) / 1000 * 10 s
    assert throttle == 5000
    assert quota.record("u", "slow", 10**9, 0) == 11_000  # at most samples * window
    assert quota.record("u", "fast", 10**9, 0) == 0  # another client id has no quota


def test_a_config_change_applies_only_quota_keys():
    managers = QuotaManagers.create()
    managers.apply_entity_config(("alice", None), {"producer_byte_rate": "1024", "SCRAM-SHA-256": "x"})
    assert managers.produce.quota_for("alice", "c") == (1024.0, ("alice", ""))
    assert managers.fetch.quota_for("alice", "c") is None
    managers.apply_entity_config(("alice", None), {})
    assert managers.produce.quota_for("alice", "c") is None


def test_entities_in_zookeeper_and_in_requests():
    assert from_change("users", "alice") == ("alice", None)
    assert from_change("users", "al%2Fice/clients/app") == ("al/ice", "app")
    assert from_change("clients", "<default>") == (None, DEFAULT)
    assert from_change("topics", "t") is None
    assert config_path(("al/ice", "app")) == ("users", "al%2Fice/clients/app")
    assert config_path((None, DEFAULT)) == ("clients", "<default>")
    assert from_components([("user", "alice"), ("client-id", None)]) == ("alice", DEFAULT)
    for bad in ([], [("user", "a"), ("user", "b")], [("ip", "1.2.3.4")], [("group", "g")]):
        with pytest.raises(ValueError):
            from_components(bad)
