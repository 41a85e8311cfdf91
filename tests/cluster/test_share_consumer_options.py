"""What confluent-kafka's `ShareConsumer` (librdkafka 2.16) documents, against a real broker:
`commit_async` with the acknowledgement commit callback, `commit_sync`'s per-partition
results, `max.poll.records`, and the broker's `group.share.partition.max.record.locks` capping
what one share-partition hands out before acknowledgements free it."""

import time

import pytest
import trio
from confluent_kafka import AcknowledgeType, Producer
from share_helpers import BROKER, consumer, drain, produce, set_group_configs, share_offsets, topic

pytestmark = pytest.mark.slow  # ZooKeeper and a broker
EXPLICIT = {"share.acknowledgement.mode": "explicit"}


def test_commit_async_reports_through_the_acknowledgement_commit_callback(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=2)
    set_group_configs(broker, "cb", share_auto_offset_reset="earliest")
    produce(broker, name, 6, partitions=2)
    c = consumer(broker, "cb", name, **EXPLICIT)
    heard: list[tuple[dict, object]] = []
    c.set_acknowledgement_commit_callback(lambda offsets, error: heard.append((offsets, error)))
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 6 and time.monotonic() < deadline:
        for m in c.poll(0.5):
            if m.error() is None:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                got.append((m.partition(), m.offset()))
        if got:
            c.commit_async()
    deadline = time.monotonic() + 10
    while sum(len(o) for offsets, _ in heard for o in offsets.values()) < 6 and time.monotonic() < deadline:
        c.poll(0.2)  # the callback is served from poll
    assert all(error is None for _, error in heard)
    acknowledged = {(tp.topic, tp.partition, o) for offsets, _ in heard for tp, os in offsets.items() for o in os}
    assert acknowledged == {(name, p, o) for p, o in got} and len(got) == 6
    assert trio.run(share_offsets, broker, "cb", None) == {name: {0: (3, 0), 1: (3, 0)}}
    # commit_sync: one result per partition, None for success
    produce(broker, name, 2, partitions=2)
    fresh = []
    deadline = time.monotonic() + 20
    while len(fresh) < 2 and time.monotonic() < deadline:
        for m in c.poll(0.5):
            if m.error() is None:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
                fresh.append(m)
    results = c.commit_sync()  # what a poll did not carry already: one result per partition
    assert results and all(v is None for v in results.values()), results
    assert {tp.partition for tp in results} <= {0, 1} and {tp.topic for tp in results} == {name}
    deadline = time.monotonic() + 10
    while trio.run(share_offsets, broker, "cb", None) != {name: {0: (4, 0), 1: (4, 0)}}:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    c.close()


def test_max_poll_records_bounds_each_poll(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    set_group_configs(broker, "small", share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(20):  # one record per batch: ShareFetch's MaxRecords stops at batch boundaries
        p.produce(name, str(i).encode(), partition=0)
        p.flush(10)
    c = consumer(broker, "small", name, **{"max.poll.records": 3})
    sizes, seen = [], set()
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        batch = [m for m in c.poll(0.5) if m.error() is None]
        if batch:
            sizes.append(len(batch))
            seen |= {m.value() for m in batch}
    assert len(seen) == 20 and max(sizes) <= 3, sizes
    c.close()


def test_the_record_lock_cap_holds_back_records_until_acknowledgements_free_it(start_broker):
    broker = start_broker(1, **(BROKER | {"group.share.partition.max.record.locks": 100}))
    name = topic(broker, partitions=1)
    set_group_configs(broker, "capped", share_auto_offset_reset="earliest")
    produce(broker, name, 250, partitions=1)
    holder = consumer(broker, "capped", name, **EXPLICIT)
    held = []
    deadline = time.monotonic() + 15
    while not held and time.monotonic() < deadline:  # (explicit mode: no next poll before acknowledging)
        held = [m for m in holder.poll(0.5) if m.error() is None]
    assert len(held) == 100, len(held)  # 250 wait, but the partition lends 100 locks at most
    other = consumer(broker, "capped", name)
    assert drain([other], 1, seconds=3) == {}  # the partition has no lock to give
    for m in held:
        holder.acknowledge(m, AcknowledgeType.ACCEPT)
    holder.commit_sync()
    # whichever member the freed locks go to; `holder` (explicit mode) must acknowledge what it
    # gets before it polls again, or librdkafka refuses the poll (IllegalStateException)
    accept = lambda c, m: c.acknowledge(m, AcknowledgeType.ACCEPT) if c is holder else None  # noqa: E731
    got = drain([other, holder], 150, seconds=30, on_message=accept)
    assert len(got) == 150
    holder.close()
    other.close()
