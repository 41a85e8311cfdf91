"""Share groups (KIP-932) judged by confluent-kafka's `ShareConsumer` (librdkafka 2.16) against a
real broker: members of one group split a topic's records with none accepted twice, RELEASE
gives a record to another delivery, REJECT never delivers it again, a lock that runs out
delivers it again with its delivery count increased until the delivery count limit archives it,
and a closed member's records go to the others."""

import itertools
import subprocess
import sys
import time
import uuid

import pytest
import trio
from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from replication_helpers import wait_until_all_brokers_known
from share_helpers import (
    BROKER,
    SHORT_LOCK_MS,
    consumer,
    drain,
    joined,
    produce,
    set_group_configs,
    share_groups_cli,
    share_lags,
    share_offsets,
    topic,
)

from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # ZooKeeper and a broker


def test_three_members_split_the_records_and_none_is_accepted_twice(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker)
    members = [consumer(broker, "workers", name) for _ in range(3)]
    joined(*members, bootstrap=broker.bootstrap, group="workers")
    produce(broker, name, 3000)
    got = drain(members, 3000)
    assert sorted(int(v) for v in got) == list(range(3000))
    assert all(len(by) == 1 for by in got.values())  # implicit acknowledgement: each once
    # the work was shared (once a fresh-clone run saw member 0 take all 3,000: the message says
    # how the records went, in the order they arrived, for the next such run)
    order = [by[0] for by in got.values()]
    runs = [(m, sum(1 for _ in g)) for m, g in itertools.groupby(order)]
    assert len(set(order)) >= 2, f"records per member, in arrival order: {runs}"
    end = time.monotonic() + 1.5
    while time.monotonic() < end:  # the next fetches carry the last records' implicit acknowledgements
        for c in members:
            assert not [m for m in c.poll(0.1) if m.error() is None]
    described = share_groups_cli(broker, "--describe", "--group", "workers", "--members")
    assert len(described) == 4 and described[0][:2] == ["GROUP", "CONSUMER-ID"]
    assigned = {tp for row in described[1:] for tp in row[6].split(",")}
    assert assigned == {f"{name}:{p}" for p in range(3)}  # every partition has a member
    offsets = share_groups_cli(broker, "--describe", "--group", "workers", "--offsets")
    assert offsets == [["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]] + [
        ["workers", name, str(p), "1000", "0"] for p in range(3)
    ]
    for c in members:
        c.close()
    assert ["workers", "Empty"] in share_groups_cli(broker, "--list")
    state = share_groups_cli(broker, "--describe", "--group", "workers", "--state")
    assert state[1][:2] == ["workers", "Empty"] and state[1][-1] == "0"
    missing = subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", "share-groups", "--bootstrap-server", broker.bootstrap]
        + ["--describe", "--group", "never-was"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "GROUP_ID_NOT_FOUND" in missing.stderr


def test_release_redelivers_and_reject_never_does(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    explicit = {"share.acknowledgement.mode": "explicit"}
    a = consumer(broker, "acks", name, **explicit)
    joined(a, bootstrap=broker.bootstrap, group="acks")
    produce(broker, name, 4, partitions=1)
    seen: list[tuple[bytes, int]] = []

    def decide(c, m):
        seen.append((m.value(), m.delivery_count()))
        if m.value() == b"1" and m.delivery_count() == 1:
            c.acknowledge(m, AcknowledgeType.RELEASE)
        elif m.value() == b"2":
            c.acknowledge(m, AcknowledgeType.REJECT)
        else:
            c.acknowledge(m, AcknowledgeType.ACCEPT)

    drain([a], 4, seconds=20, on_message=decide)
    a.commit_sync()
    end = time.monotonic() + 6.0  # the released record comes back at the next fetch
    while time.monotonic() < end:
        for m in a.poll(0.3):
            decide(a, m)
        a.commit_sync()
    assert sorted(seen) == [(b"0", 1), (b"1", 1), (b"1", 2), (b"2", 1), (b"3", 1)]
    # every record is done: the share-partition start offset is past them (DescribeShareGroupOffsets)
    assert trio.run(share_offsets, broker, "acks", None) == {name: {0: (4, ErrorCode.NONE)}}
    asked = trio.run(share_offsets, broker, "acks", [{"topic_name": name, "partitions": [0, 7]}])
    assert asked == {name: {0: (4, ErrorCode.NONE), 7: (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}}
    unknown = trio.run(share_offsets, broker, "never-was", None)
    assert unknown == ErrorCode.GROUP_ID_NOT_FOUND
    a.close()


def test_an_unacknowledged_record_comes_back_after_its_lock_and_is_archived_at_the_limit(start_broker):
    short = {"group.share.delivery.count.limit": 2, "group.share.record.lock.duration.ms": SHORT_LOCK_MS}
    broker = start_broker(1, **(BROKER | short))
    name = topic(broker, partitions=1)
    explicit = {"share.acknowledgement.mode": "explicit"}
    holder = consumer(broker, "locks", name, **explicit)
    joined(holder, bootstrap=broker.bootstrap, group="locks")
    produce(broker, name, 1, partitions=1)
    first = [m for m in drain([holder], 1, seconds=10, on_message=lambda c, m: None).items()]
    assert first  # acquired by `holder`, which neither acknowledges nor polls again
    other = consumer(broker, "locks", name, **explicit)
    again: list[int] = []
    deadline = time.monotonic() + 4 * SHORT_LOCK_MS / 1000
    while time.monotonic() < deadline and not again:
        again += [m.delivery_count() for m in other.poll(0.3) if m.error() is None]
    assert again == [2]  # given again once the holder's lock ran out; `other` keeps it too
    # the second lock runs out at the delivery count limit: archived, never delivered again
    third = consumer(broker, "locks", name)
    assert drain([third], 1, seconds=3 * SHORT_LOCK_MS / 1000) == {}
    assert trio.run(share_offsets, broker, "locks", None) == {name: {0: (1, ErrorCode.NONE)}}
    for c in (third, other, holder):
        c.close()


def test_a_closed_members_records_go_to_the_others(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    explicit = {"share.acknowledgement.mode": "explicit"}
    leaver = consumer(broker, "handover", name, **explicit)
    joined(leaver, bootstrap=broker.bootstrap, group="handover")
    produce(broker, name, 5, partitions=1)
    held = drain([leaver], 5, seconds=20)
    assert len(held) == 5
    leaver.close()  # without acknowledging: its session closes and the records are released
    stayer = consumer(broker, "handover", name)
    got = drain([stayer], 5, seconds=10)  # well before a 30 s lock could have run out
    assert sorted(got) == sorted(held)
    stayer.close()  # the last member leaves: the group is Empty, and can be deleted
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups(["handover"], request_timeout=30)["handover"].result(30)
    with pytest.raises(KafkaException) as gone:
        admin.delete_consumer_groups(["handover"], request_timeout=30)["handover"].result(30)
    assert gone.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


HOLDER = """
import sys
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "crash", "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[2]])
held = 0
while held < 5:
    held += len([m for m in c.poll(0.5) if m.error() is None])
print("held", flush=True)
sys.stdin.read()  # until killed
"""


def test_a_killed_members_records_go_to_the_others_when_its_connection_closes(start_broker):
    """Kafka ends a share session when the connection that opened it closes: a member killed
    -9 (no leave, no closing ShareFetch) gives its records back at once, not after the 30 s lock."""
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    set_group_configs(broker, "crash", share_auto_offset_reset="earliest")
    produce(broker, name, 5, partitions=1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, broker.bootstrap, name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        stayer = consumer(broker, "crash", name)
        assert drain([stayer], 1, seconds=2) == {}  # held by the other member
        holder.kill()
        holder.wait(10)
        killed = time.monotonic()
        got = drain([stayer], 5, seconds=20)
        assert sorted(got) == [str(i).encode() for i in range(5)]
        assert time.monotonic() - killed < 15  # far sooner than the lock
        stayer.close()
    finally:
        holder.kill()


def test_share_auto_offset_reset_earliest_set_on_the_group_reads_older_records(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    produce(broker, name, 5, partitions=1)  # before any member joined
    described = set_group_configs(broker, "early", share_auto_offset_reset="earliest")
    assert (
        described["share.auto.offset.reset"] == "earliest" and described["share.isolation.level"] == "read_uncommitted"
    )
    early = consumer(broker, "early", name)
    assert sorted(drain([early], 5, seconds=20)) == [str(i).encode() for i in range(5)]
    with pytest.raises(KafkaException) as refused:  # below group.share.min.record.lock.duration.ms
        set_group_configs(broker, "early", share_record_lock_duration_ms="10")
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    late = consumer(broker, "late", name)  # Kafka's default, latest: none of them
    assert drain([late], 1, seconds=4) == {}
    early.close()
    late.close()


def test_read_committed_never_delivers_an_aborted_transaction(start_broker):
    transactions = {"transaction_state_log_replication_factor": 1, "transaction_state_log_min_isr": 1}
    broker = start_broker(1, **(BROKER | transactions))
    name = topic(broker, partitions=1)
    set_group_configs(broker, "committed", share_auto_offset_reset="earliest", share_isolation_level="read_committed")
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"t-{name}"})
    txn.init_transactions(30)
    for values, commit in (([b"a1", b"a2"], False), ([b"c1", b"c2"], True)):
        txn.begin_transaction()
        for v in values:
            txn.produce(name, v, partition=0)
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    reader = consumer(broker, "committed", name)
    got = drain([reader], 2, seconds=20)
    assert drain([reader], 1, seconds=3) == {}  # nothing more: the aborted pair is archived
    assert sorted(got) == [b"c1", b"c2"]
    reader.close()


def test_three_members_on_three_brokers_read_30000_records_once(start_broker):
    """Every broker leads some of the partitions: each member's ShareFetch goes to each leader,
    with a share session per broker."""
    cluster = {
        **BROKER,
        "offsets_topic_replication_factor": 3,
        "share_coordinator_state_topic_replication_factor": 3,
        "share_coordinator_state_topic_min_isr": 2,
        "default_replication_factor": 3,
    }
    brokers = [start_broker(i, **cluster) for i in (1, 2, 3)]
    # a topic created before the controller saw every registration would be short of replicas
    trio.run(wait_until_all_brokers_known, {b.broker_id: b for b in brokers})
    bootstrap = ",".join(b.bootstrap for b in brokers)
    name = f"jobs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 3, 3)])[name].result(30)
    members = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "spread"}) for _ in range(3)]
    for c in members:
        c.subscribe([name])
    joined(*members, bootstrap=bootstrap, group="spread")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(30_000):
        p.produce(name, str(i).encode(), partition=i % 3)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    got = drain(members, 30_000, seconds=180)
    assert sorted(int(v) for v in got) == list(range(30_000))
    twice = sorted(int(v) for v, by in got.items() if len(by) > 1)
    assert twice == [], f"{len(twice)} records accepted twice, first {twice[:10]}"
    # members share partitions and compete for their records: which member gets how many is not
    # promised (Kafka's neither), so only "once" and "all" are asserted
    for c in members:
        assert not [m for m in c.poll(0.5) if m.error() is None]  # carries the last poll's acknowledgements
        c.close()
    # DescribeShareGroupOffsets v1's lag (KIP-1226): the coordinator asks the other leaders
    for i in range(30):
        p.produce(name, b"later", partition=i % 3)
    assert p.flush(30) == 0
    expected = {name: {i: (10_000, 10) for i in range(3)}}
    deadline = time.monotonic() + 20
    while (lags := trio.run(share_lags, brokers, "spread")) != expected and time.monotonic() < deadline:
        time.sleep(0.5)
    assert lags == expected


def test_acknowledgements_and_delivery_counts_survive_the_leaders_death(start_broker):
    """The share state is durable at the share coordinator (`__share_group_state`, RF 2): after the
    partition leader is killed, the new leader serves what the old one acknowledged as done and
    gives the records that were only acquired again, their first delivery counted."""
    cluster = {
        **BROKER,
        "offsets_topic_replication_factor": 2,
        "share_coordinator_state_topic_replication_factor": 2,
        "default_replication_factor": 2,
    }
    brokers = {i: start_broker(i, **cluster) for i in (1, 2)}
    trio.run(wait_until_all_brokers_known, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    name = f"jobs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 2)])[name].result(30)
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "durable", "share.acknowledgement.mode": "explicit"})
    c.subscribe([name])
    joined(c, bootstrap=bootstrap, group="durable")
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
    for i in range(20):
        p.produce(name, str(i).encode(), partition=0)
    assert p.flush(30) == 0  # one batch: one fetch acquires all 20 for `c`
    first: list = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not first:
        first = [m for m in c.poll(0.5) if m.error() is None]
    assert sorted(int(m.value()) for m in first) == list(range(20))
    for m in first:
        if int(m.value()) < 10:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync()  # answered once the acknowledgements are durable; 10-19 stay acquired by `c`
    leader = admin.list_topics(name, timeout=30).topics[name].partitions[0].leader
    brokers[leader].kill()
    other = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "durable"})
    other.subscribe([name])
    again: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(again) < 10:
        for m in other.poll(0.5):
            if m.error() is None:
                again[int(m.value())] = m.delivery_count()
    assert again == dict.fromkeys(range(10, 20), 2), again  # never 0-9: acknowledged before the kill
    end = time.monotonic() + 3
    while time.monotonic() < end:
        late = [m.value() for m in other.poll(0.3) if m.error() is None]
        assert not late, late
    other.close()


def test_killing_the_share_coordinator_loses_no_record_and_accepts_none_twice(start_broker):
    """The broker leading the share-partition's `__share_group_state` partition (not the data
    partition's leader) is killed while a share consumer reads: the leader's writes wait for the
    new coordinator (acknowledgements answered with an error meanwhile are written later), and
    every record is still accepted exactly once."""
    cluster = {
        **BROKER,
        "offsets_topic_replication_factor": 2,
        "share_coordinator_state_topic_replication_factor": 2,
        "share_coordinator_state_topic_num_partitions": 1,
        "default_replication_factor": 2,
    }
    brokers = {i: start_broker(i, **cluster) for i in (1, 2)}
    trio.run(wait_until_all_brokers_known, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "coord-kill"})
    warm = f"warm-{uuid.uuid4().hex[:8]}"  # its first read creates __share_group_state
    admin.create_topics([NewTopic(warm, 1, 2)])[warm].result(30)
    c.subscribe([warm])
    joined(c, bootstrap=bootstrap, group="coord-kill")
    deadline = time.monotonic() + 30
    coordinator = -1
    while coordinator < 0 and time.monotonic() < deadline:
        found = admin.list_topics("__share_group_state", timeout=10).topics.get("__share_group_state")
        if found is not None and found.partitions and found.partitions[0].leader >= 0:
            coordinator = found.partitions[0].leader
        c.poll(0.2)
    assert coordinator > 0
    data_leader = 1 if coordinator == 2 else 2
    name = f"jobs-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[data_leader, coordinator]])])[
        name
    ].result(30)
    c.subscribe([name])
    joined(c, bootstrap=bootstrap, group="coord-kill", topic=name)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(2000):
        p.produce(name, str(i).encode(), partition=0)
    assert p.flush(30) == 0
    got: dict[bytes, list[int]] = {}
    killed = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(got) < 2000:
        for m in c.poll(0.3):
            if m.error() is None:
                got.setdefault(m.value(), []).append(m.delivery_count())
        if not killed and len(got) >= 300:
            brokers[coordinator].kill()
            killed = True
    assert killed and sorted(int(v) for v in got) == list(range(2000)), len(got)
    twice = sorted(int(v) for v, counts in got.items() if len(counts) > 1)
    assert twice == [], f"{len(twice)} records delivered twice, first {twice[:10]}"
    c.close()
