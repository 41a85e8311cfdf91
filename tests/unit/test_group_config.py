"""Per-group configs (the GROUP config resource, KIP-932's share keys): validation against the
broker's bounds with Kafka's messages, effective values over the broker's defaults, and what
DescribeConfigs shows."""

from typing import NamedTuple

import pytest

from broker.share.share_manager import _acquirable
from coordinator.group import group_config as gc

BROKER = {
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
}


def test_overrides_are_typed_and_bounded_by_the_broker():
    typed = gc.validate({"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}, BROKER)
    assert typed == {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": 20000}
    assert gc.effective("share.record.lock.duration.ms", typed, BROKER) == 20000
    assert gc.effective("share.isolation.level", typed, BROKER) == "read_uncommitted"
    assert gc.effective("share.session.timeout.ms", typed, BROKER) == 45000


@pytest.mark.parametrize(
    "stored, message",
    [
        ({"share.record.lock.duration.ms": "1000"}, "must be greater than or equal to 15000"),
        ({"share.record.lock.duration.ms": "x"}, "Not a number of type INT"),
        ({"share.auto.offset.reset": "none"}, "String must be one of: latest, earliest"),
        ({"share.isolation.level": "READ_COMMITTED"}, "String must be one of"),
        ({"consumer.session.timeout.ms": "45000"}, "Unknown group config name"),
    ],
)
def test_bad_values_are_refused_with_kafkas_message(stored, message):
    with pytest.raises(gc.GroupConfigError, match=message):
        gc.validate(stored, BROKER)


def test_describe_shows_every_key_with_its_source():
    entries = {e.name: e for e in gc.describe({"share.isolation.level": "read_committed"}, BROKER)}
    assert set(entries) == set(gc.GROUP_CONFIG_KEYS)
    assert entries["share.isolation.level"].overridden and entries["share.isolation.level"].value == "read_committed"
    assert (
        not entries["share.heartbeat.interval.ms"].overridden and entries["share.heartbeat.interval.ms"].value == "5000"
    )
    only = gc.describe({}, BROKER, keys=["share.auto.offset.reset", "nope"])
    assert [e.name for e in only] == ["share.auto.offset.reset"]


def test_a_store_keeps_valid_overrides_and_drops_emptied_ones():
    store = gc.GroupConfigs(BROKER)
    store.set("g", {"share.auto.offset.reset": "earliest"})
    assert (
        store.get("g", "share.auto.offset.reset") == "earliest"
        and store.get("other", "share.auto.offset.reset") == "latest"
    )
    with pytest.raises(gc.GroupConfigError):
        store.set("g", {"share.auto.offset.reset": "never"})
    assert store.get("g", "share.auto.offset.reset") == "earliest"  # left as it was
    store.set("g", {})
    assert store.overrides("g") == {}


class Header(NamedTuple):
    """The batch header fields acquisition reads (protocol.record_batch.BatchHeader's names)."""

    base_offset: int
    last_offset: int
    producer_id: int
    is_transactional: bool = False
    is_control: bool = False


class Aborted(NamedTuple):
    producer_id: int
    first_offset: int


def test_read_committed_acquisition_skips_aborted_transactions_and_markers():
    log = [
        (0, Header(0, 1, 7, True)),  # producer 7's transaction, aborted at 4
        (0, Header(2, 3, 8, True)),  # producer 8's, committed at 5
        (0, Header(4, 4, 7, True, True)),  # 7's ABORT marker
        (0, Header(5, 5, 8, True, True)),  # 8's COMMIT marker
        (0, Header(6, 7, 7, True)),  # 7's next transaction: not aborted
    ]
    skipped = [b.is_control for b in _acquirable(log, [Aborted(7, 0)])]
    assert skipped == [True, False, True, True, False]
    assert [b.is_control for b in _acquirable(log, [])] == [False, False, True, True, False]
