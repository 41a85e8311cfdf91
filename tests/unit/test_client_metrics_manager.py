"""KIP-714's client metrics on the broker (`client_metrics/`), without sockets: subscriptions
parsed and matched, GetTelemetrySubscriptions and PushTelemetry with each of Kafka's errors,
OTLP payloads decoded with opentelemetry-proto, and the bounds on instances and series."""

import uuid

import cramjam
import pytest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from client_metrics import config
from client_metrics.config import ClientInfo
from client_metrics.manager import ZERO, ClientMetricsManager
from protocol import record_batch as rb
from protocol.errors import ErrorCode as E

CLIENT = ClientInfo("", "orders-producer", "confluent-kafka-python", "2.16.1", "127.0.0.1", "50000")


def payload(*points: tuple[str, float], codec: int = rb.NONE, attrs: dict | None = None) -> bytes:
    data = metrics_pb2.MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for name, value in points:
        metric = scope.metrics.add(name=name)
        point = metric.gauge.data_points.add(as_double=value)
        for k, v in (attrs or {}).items():
            point.attributes.append(common_pb2.KeyValue(key=k, value=common_pb2.AnyValue(string_value=v)))
    raw = data.SerializeToString()
    return bytes(cramjam.zstd.compress(raw)) if codec == rb.ZSTD else raw


@pytest.fixture
def manager():
    clock = [0.0]
    m = ClientMetricsManager(lambda: clock[0], max_bytes=10_000, max_instances=3, max_series=4)
    m.clock = clock
    return m


def subscribe(m, name="producers", metrics="org.apache.kafka.producer.", interval="1000", match=""):
    stored = {"metrics": metrics, "interval.ms": interval} | ({"match": match} if match else {})
    m.set_subscription(name, config.parse(name, stored))


def test_subscriptions_parse_match_and_combine():
    s = config.parse("s", {"metrics": "a.,b.", "interval.ms": "500", "match": "client_id=orders-.*"})
    assert s.metrics == ("a.", "b.") and s.interval_ms == 500 and s.matches(CLIENT)
    assert not config.parse("t", {"match": "client_id=orders"}).matches(CLIENT)  # the whole value must match
    assert config.parse("all", {"metrics": "*"}).metrics == ("",)
    for bad in ({"interval.ms": "50"}, {"match": "nope=x"}, {"match": "client_id=("}, {"colour": "red"}):
        with pytest.raises(ValueError):
            config.parse("bad", bad)


def test_a_client_without_a_subscription_is_told_to_push_nothing(manager):
    got = manager.get_subscriptions(ZERO, CLIENT, "User:ANONYMOUS", "PLAINTEXT")
    assert got.error_code == E.NONE and got.instance_id != ZERO
    assert got.metrics == () and got.interval_ms == config.DEFAULT_INTERVAL_MS


def test_the_union_of_matching_subscriptions_at_the_shortest_interval(manager):
    subscribe(manager, "producers", "org.apache.kafka.producer.", "2000")
    subscribe(manager, "all-orders", "org.apache.kafka.consumer.", "1000", "client_software_name=confluent.*")
    subscribe(manager, "others", "x.", "100", "client_id=billing")
    got = manager.get_subscriptions(ZERO, CLIENT, "User:ANONYMOUS", "PLAINTEXT")
    assert got.metrics == ("org.apache.kafka.consumer.", "org.apache.kafka.producer.") and got.interval_ms == 1000


def test_push_errors_follow_kafkas_order(manager):
    subscribe(manager)
    got = manager.get_subscriptions(ZERO, CLIENT, "User:ANONYMOUS", "PLAINTEXT")
    iid, sid = got.instance_id, got.subscription_id
    good = payload(("org.apache.kafka.producer.record.send.rate", 12.5))

    def push(subscription=sid, terminating=False, codec=rb.NONE, data=good):
        return manager.push(iid, subscription, terminating, codec, data, CLIENT, "User:ANONYMOUS", "PLAINTEXT")

    assert (
        manager.get_subscriptions(iid, CLIENT, "User:ANONYMOUS", "PLAINTEXT").error_code == E.THROTTLING_QUOTA_EXCEEDED
    )
    assert push(subscription=sid + 1) == E.UNKNOWN_SUBSCRIPTION_ID
    assert push() == E.NONE
    manager.clock[0] = 500.0
    assert push() == E.THROTTLING_QUOTA_EXCEEDED  # sooner than the 1 s interval
    manager.clock[0] = 1500.0
    assert push(codec=7) == E.UNSUPPORTED_COMPRESSION_TYPE
    manager.clock[0] = 3000.0
    assert push(data=b"x" * 10_001) == E.TELEMETRY_TOO_LARGE
    manager.clock[0] = 4500.0
    assert push(data=b"\xff\xff not protobuf") == E.INVALID_RECORD
    manager.clock[0] = 6000.0
    assert push(codec=rb.ZSTD, data=payload(("org.apache.kafka.producer.record.send.rate", 20.0), codec=rb.ZSTD)) == 0
    instance = manager.instances[iid]
    assert instance.series == {("org.apache.kafka.producer.record.send.rate", ()): 20.0}
    assert push(terminating=True) == E.NONE  # a terminating push is never throttled
    assert push() == E.INVALID_REQUEST
    assert manager.expire() == 1 and manager.series_count == 0


def test_a_changed_subscription_is_fetched_again_and_unsubscribed_metrics_are_dropped(manager):
    subscribe(manager)
    got = manager.get_subscriptions(ZERO, CLIENT, "User:ANONYMOUS", "PLAINTEXT")
    subscribe(manager, interval="2000")  # the set changed: the old id is unknown, asking again is allowed
    assert (
        manager.push(got.instance_id, got.subscription_id, False, 0, b"", CLIENT, "u", "l") == E.UNKNOWN_SUBSCRIPTION_ID
    )
    again = manager.get_subscriptions(got.instance_id, CLIENT, "User:ANONYMOUS", "PLAINTEXT")
    assert again.error_code == E.NONE and again.interval_ms == 2000 and again.subscription_id != got.subscription_id
    data = payload(("org.apache.kafka.producer.a", 1.0), ("org.apache.kafka.consumer.b", 2.0))
    assert manager.push(got.instance_id, again.subscription_id, False, 0, data, CLIENT, "u", "l") == E.NONE
    assert list(manager.instances[got.instance_id].series) == [("org.apache.kafka.producer.a", ())]


def test_instances_and_series_are_bounded_and_age_out(manager):
    subscribe(manager, metrics="*")
    ids = [manager.get_subscriptions(ZERO, CLIENT, "u", "l") for _ in range(4)]
    assert [g.error_code for g in ids] == [E.NONE] * 3 + [E.THROTTLING_QUOTA_EXCEEDED]
    assert manager.dropped_instances == 1 and len(manager.instances) == 3
    first = ids[0]
    data = payload(*[(f"m{i}", float(i)) for i in range(6)], attrs={"topic": "orders"})
    assert manager.push(first.instance_id, first.subscription_id, False, 0, data, CLIENT, "u", "l") == E.NONE
    assert manager.series_count == 4 and manager.dropped_series == 2
    manager.clock[0] = 2 * 1000 * 300 + 1  # twice the (default) interval of silence
    assert manager.expire() == 3 and not manager.instances and manager.series_count == 0


def test_a_push_from_an_instance_this_broker_never_saw_asks_it_to_subscribe_here(manager):
    subscribe(manager)
    stranger = uuid.uuid4()
    assert manager.push(stranger, 123, False, 0, b"", CLIENT, "u", "l") == E.UNKNOWN_SUBSCRIPTION_ID
    assert manager.get_subscriptions(stranger, CLIENT, "u", "l").error_code == E.NONE
