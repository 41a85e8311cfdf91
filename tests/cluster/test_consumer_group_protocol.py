"""KIP-848's consumer group protocol judged by confluent-kafka (librdkafka) with
`group.protocol=consumer`, each member in its own process (tests/helpers/kip848_member.py), on
real brokers: the partitions are shared exactly once, a killed member's move within its session
timeout + 5 s, a static member gets its own back, a regex subscription follows new topics,
commits resume exactly, and a coordinator's death keeps assignments and offsets."""

import time

import pytest
from admin_helpers import raw, wait
from group_helpers import create_topics, produce
from member_processes import CONSUMER_BROKER, SESSION_MS, all_partitions, shared_exactly_once
from test_metrics import scrape, value

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow


def test_members_share_partitions_once_and_a_killed_ones_move_within_its_session(start_broker, members):
    broker = start_broker(1, **CONSUMER_BROKER)
    create_topics(broker.bootstrap, {"t": 12})
    group = [members(broker.bootstrap, "g", ["t"]) for _ in range(3)]
    wait(lambda: shared_exactly_once(group, all_partitions("t", 12)), "3 members to own 12 partitions once", 60)
    assert sorted(len(m.assigned) for m in group) == [4, 4, 4]
    values = [f"a{i}" for i in range(240)]
    produce(broker.bootstrap, "t", [v.encode() for v in values], partitions=12)
    wait(lambda: sum(len(m.records) for m in group) >= 240, "every record read", 60)
    read = [r[3] for m in group for r in m.records]
    assert sorted(read) == sorted(values)  # each exactly once
    for m in group:  # each read only its own partitions
        assert {(r[0], r[1]) for r in m.records} <= m.assigned

    killed_at = time.monotonic()
    group[0].kill()
    rest = group[1:]
    wait(
        lambda: shared_exactly_once(rest, all_partitions("t", 12)), "the survivors to own all 12", SESSION_MS / 1000 + 5
    )
    moved_s = time.monotonic() - killed_at
    assert moved_s <= SESSION_MS / 1000 + 5
    more = [f"b{i}" for i in range(120)]
    produce(broker.bootstrap, "t", [v.encode() for v in more], partitions=12)
    wait(lambda: set(more) <= {r[3] for m in rest for r in m.records}, "the survivors to read the new records", 60)
    assert not [e for m in group for e in m.errors if "commit" in e], [m.errors for m in group]


def test_a_static_member_restarted_gets_its_partitions_back_and_nobody_else_moves(start_broker, members):
    # the session outlasts a restart on a loaded machine: a new member process needs seconds to start and
    # join, and once the session of the leaving static member ends its partitions rightly move to the others
    broker = start_broker(1, **{**CONSUMER_BROKER, "group_consumer_session_timeout_ms": 30_000}, metrics_port=0)
    create_topics(broker.bootstrap, {"s": 12})
    group = [members(broker.bootstrap, "sg", ["s"], **{"group.instance.id": f"i{i}"}) for i in range(3)]
    wait(lambda: shared_exactly_once(group, all_partitions("s", 12)), "3 static members to own 12 partitions once", 60)
    time.sleep(2)  # stable: no further change
    before = [set(m.assigned) for m in group]
    changes = [len(m.assignments) for m in group]
    group[0].stop()
    again = members(broker.bootstrap, "sg", ["s"], **{"group.instance.id": "i0"})
    wait(lambda: again.assigned == before[0], "the restarted static member to get its partitions back", 30)
    time.sleep(2)
    for m, was, n in zip(group[1:], before[1:], changes[1:], strict=True):
        assert m.assigned == was and len(m.assignments) == n  # never reassigned meanwhile
    # the coordinator's metrics: one Stable consumer group of 3 members, reconciled, epochs known
    samples = scrape(broker)
    assert value(samples, "kafka_server_group_coordinator_metrics_group_count", protocol="consumer") == 1
    assert value(samples, "kafka_server_group_coordinator_metrics_consumer_group_count", state="Stable") == 1
    assert value(samples, "kafka_consumergroup_members", consumergroup="sg") == 3
    assert value(samples, "kafka_consumergroup_group_epoch", consumergroup="sg") >= 3
    assert value(samples, "kafka_consumergroup_assignment_epoch", consumergroup="sg") == value(
        samples, "kafka_consumergroup_group_epoch", consumergroup="sg"
    )
    assert value(samples, "kafka_consumergroup_assignment_lag", consumergroup="sg") == 0
    # one rebalance (a new target assignment) per group epoch at most: joins that come together share one
    rebalances = value(samples, "kafka_server_group_coordinator_metrics_consumer_group_rebalance_total")
    assert 1 <= rebalances <= value(samples, "kafka_consumergroup_group_epoch", consumergroup="sg")


def test_a_regex_subscription_picks_up_a_topic_created_later(start_broker, members):
    broker = start_broker(1, **CONSUMER_BROKER)
    create_topics(broker.bootstrap, {"rx-a": 2, "other": 2})
    member = members(broker.bootstrap, "rg", ["^rx-.*"])
    wait(lambda: member.assigned == all_partitions("rx-a", 2), "the regex member to own rx-a", 60)
    create_topics(broker.bootstrap, {"rx-b": 3})
    wait(
        lambda: member.assigned == all_partitions("rx-a", 2) | all_partitions("rx-b", 3),
        "rx-b to join the regex assignment",
        60,
    )
    produce(broker.bootstrap, "rx-b", [b"late-%d" % i for i in range(6)], partitions=3)
    wait(lambda: {r[3] for r in member.records} >= {f"late-{i}" for i in range(6)}, "the new topic's records", 60)
    assert not any(r[0] == "other" for r in member.records)


def test_commits_and_restarts_resume_exactly(start_broker, members):
    broker = start_broker(1, **CONSUMER_BROKER)
    create_topics(broker.bootstrap, {"c": 4})
    first_half = [f"c{i}" for i in range(50)]
    produce(broker.bootstrap, "c", [v.encode() for v in first_half], partitions=4)
    one = members(broker.bootstrap, "cg", ["c"])
    wait(lambda: len(one.records) >= 50, "the first 50 records", 60)
    one.stop()
    second_half = [f"c{i}" for i in range(50, 100)]
    produce(broker.bootstrap, "c", [v.encode() for v in second_half], partitions=4)
    two = members(broker.bootstrap, "cg", ["c"])
    wait(lambda: len(two.records) >= 50, "the next 50 records", 60)
    time.sleep(1)
    assert sorted(r[3] for r in one.records) == sorted(first_half)
    assert sorted(r[3] for r in two.records) == sorted(second_half)


def _coordinator_of(broker, group: str) -> int | None:
    """The group's coordinator as `broker` names it; None while there is none (COORDINATOR_NOT_AVAILABLE,
    Kafka's answer while the group's __consumer_offsets partition has no leader, as after a kill)."""
    r = raw(broker, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=3)
    if r.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE:
        return None
    assert r.error_code == ErrorCode.NONE
    return r.node_id


def _describe(broker, group: str):
    return raw(broker, ApiKey.CONSUMER_GROUP_DESCRIBE, {"group_ids": [group], "include_authorized_operations": False})


def test_a_coordinator_kill_keeps_assignments_epochs_and_offsets(start_broker, members):
    config = {**CONSUMER_BROKER, "offsets_topic_replication_factor": 3, "default_replication_factor": 3}
    brokers = {i: start_broker(i, **config) for i in (1, 2, 3)}
    create_topics(brokers[1].bootstrap, {"k": 6}, rf=3)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    group = [members(bootstrap, "kg", ["k"]) for _ in range(2)]
    wait(lambda: shared_exactly_once(group, all_partitions("k", 6)), "2 members to own 6 partitions once", 60)
    values = [f"k{i}" for i in range(60)]
    produce(bootstrap, "k", [v.encode() for v in values], partitions=6)
    wait(lambda: sum(len(m.records) for m in group) >= 60, "the first 60 records", 60)
    coordinator = _coordinator_of(brokers[1], "kg")
    assert coordinator is not None
    survivor = brokers[next(i for i in brokers if i != coordinator)]
    described = _describe(brokers[coordinator], "kg").groups[0]
    assert described.error_code == ErrorCode.NONE and described.group_state == "Stable"
    epochs = {m.member_id: m.member_epoch for m in described.members}
    before = [set(m.assigned) for m in group]

    brokers[coordinator].kill()

    def moved():
        new = _coordinator_of(survivor, "kg")
        return new not in (None, coordinator) and _describe(brokers[new], "kg").groups[0].error_code == ErrorCode.NONE

    wait(moved, "the group to have a new coordinator", 60)
    new = _coordinator_of(survivor, "kg")
    assert new is not None
    after = _describe(brokers[new], "kg").groups[0]
    assert {m.member_id: m.member_epoch for m in after.members} == epochs  # loaded as it was
    more = [f"k{i}" for i in range(60, 120)]
    produce(survivor.bootstrap, "k", [v.encode() for v in more], partitions=6)
    wait(lambda: sum(len(m.records) for m in group) >= 120, "the next 60 records", 90)
    assert [set(m.assigned) for m in group] == before
    read = sorted(r[3] for m in group for r in m.records)
    assert read == sorted(values + more)  # committed offsets kept: nothing read twice


def test_admin_clients_list_describe_and_delete_consumer_groups(start_broker, members):
    """confluent's and kafka-python's admin clients on a consumer group: listed with its type,
    described with its members and assignments (kafka-python through DescribeGroups), its
    offsets read, and the group deleted only once empty."""
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    broker = start_broker(1, **CONSUMER_BROKER)
    create_topics(broker.bootstrap, {"ad": 4, "old": 1})
    produce(broker.bootstrap, "ad", [b"x%d" % i for i in range(8)], partitions=4)
    pair = [members(broker.bootstrap, "ag", ["ad"]) for _ in range(2)]
    wait(lambda: shared_exactly_once(pair, all_partitions("ad", 4)), "2 members to own 4 partitions", 60)
    wait(lambda: sum(len(m.records) for m in pair) >= 8, "the records read and committed", 60)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
    assert [(g.group_id, g.type) for g in listed.valid] == [("ag", ConsumerGroupType.CONSUMER)]
    classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
    assert classic_only.valid == []
    described = admin.describe_consumer_groups(["ag"])["ag"].result(30)
    assigned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
    assert len(described.members) == 2 and assigned == [0, 1, 2, 3]
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    kp_group = kp.describe_groups(["ag"])["ag"]
    assert kp_group["protocol_type"] == "consumer" and len(kp_group["members"]) == 2
    # the group cannot be deleted while it has members
    futures = admin.delete_consumer_groups(["ag"])
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        futures["ag"].result(30)
    for m in pair:
        m.stop()
    committed = kp.list_group_offsets({"ag": None})
    assert sum(o.offset for o in committed["ag"].values()) == 8
    admin.delete_consumer_groups(["ag"])["ag"].result(30)
    assert not kp.list_group_offsets({"ag": None})["ag"]
