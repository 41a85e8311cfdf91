"""ShareGroupHeartbeat's decisions (KIP-932) as pure functions: records and answers from a share
group, a request and the cluster's topics, with the group changed only by replaying the records
(as the coordinator does after its write)."""

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.group import share_assignor
from coordinator.group import share_records as sr
from coordinator.group.consumer_heartbeat import HeartbeatError
from coordinator.group.consumer_records import TopicMetadata
from coordinator.group.share_group import ShareGroup
from coordinator.group.share_heartbeat import ShareHeartbeatRequest, heartbeat
from protocol.errors import ErrorCode as E

ORDERS = TopicMetadata(uuid.UUID(int=1), "orders", 3)
TOPICS = {"orders": ORDERS}


def beat(group, member, epoch, topics=("orders",), cluster=TOPICS, max_size=200):
    """Heartbeat and replay the records onto `group` through their bytes, as a write does."""
    req = ShareHeartbeatRequest("jobs", member, epoch, None, topics, "client", "/127.0.0.1")
    outcome = heartbeat(group, req, cluster, max_size)
    for record in outcome.records:
        group.replay(sr.decode(*sr.encode(record)))
    return outcome


def partitions(outcome):
    return {p for ps in (outcome.assignment or {}).values() for p in ps}


def test_a_member_joins_and_gets_every_partition_then_a_second_shares_them():
    group = ShareGroup("jobs")
    a = beat(group, "a", 0)
    assert (a.member_epoch, partitions(a)) == (1, {0, 1, 2})
    assert group.exists and group.group_epoch == 1 and group.state == "Stable"
    b = beat(group, "b", 0)
    assert b.member_epoch == 2 and partitions(b)  # the second member reads too
    again = beat(group, "a", 1, topics=None)  # a heartbeat: a keeps what it had, at the new epoch
    assert again.member_epoch == 2 and again.assignment is None
    assert group.members["a"].assigned == {ORDERS.topic_id: frozenset({0, 1, 2})}


def test_a_leave_removes_the_member_and_bumps_the_epoch():
    group = ShareGroup("jobs")
    beat(group, "a", 0)
    beat(group, "b", 0)
    left = beat(group, "a", -1)
    assert left.member_epoch == -1 and list(group.members) == ["b"] and group.group_epoch == 3
    assert "a" not in group.target
    with pytest.raises(HeartbeatError) as unknown:
        beat(group, "a", -1)
    assert unknown.value.error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(
    "member, epoch, topics, message",
    [
        ("", 0, ("orders",), "MemberId can't be empty."),
        ("a", 0, None, "SubscribedTopicNames must be set in first request."),
        ("a", 0, (), "SubscribedTopicNames must be set in first request."),
        ("a", -2, None, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests_are_refused_with_kafkas_messages(member, epoch, topics, message):
    with pytest.raises(HeartbeatError) as refused:
        beat(ShareGroup("jobs"), member, epoch, topics)
    assert (refused.value.error_code, refused.value.message) == (E.INVALID_REQUEST, message)


def test_epochs_fence_and_unknown_members_must_join():
    group = ShareGroup("jobs")
    beat(group, "a", 0)
    beat(group, "b", 0)  # epoch 2; a is at 1 and reconciles to 2 on its next heartbeat
    assert beat(group, "a", 1, topics=None).member_epoch == 2
    assert beat(group, "a", 1, topics=None).member_epoch == 2  # the previous epoch: a lost answer
    for wrong, topics in ((3, None), (0, ("orders",))):  # ahead; a rejoin behind its previous epoch
        with pytest.raises(HeartbeatError) as fenced:
            beat(group, "a", wrong, topics=topics)
        assert fenced.value.error_code == E.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatError) as unknown:
        beat(group, "c", 4, topics=None)
    assert unknown.value.error_code == E.UNKNOWN_MEMBER_ID
    with pytest.raises(HeartbeatError) as full:
        beat(group, "c", 0, max_size=2)
    assert full.value.error_code == E.GROUP_MAX_SIZE_REACHED


def test_a_topic_that_grows_bumps_the_epoch_and_reaches_the_members():
    group = ShareGroup("jobs")
    beat(group, "a", 0)
    grown = {"orders": TopicMetadata(ORDERS.topic_id, "orders", 5)}
    answer = beat(group, "a", 1, topics=None, cluster=grown)
    assert answer.member_epoch == 2 and partitions(answer) == {0, 1, 2, 3, 4}


def test_a_subscription_to_a_missing_topic_assigns_nothing_until_it_exists():
    group = ShareGroup("jobs")
    answer = beat(group, "a", 0, topics=("later",))
    assert answer.member_epoch == 1 and partitions(answer) == set()
    later = {"later": TopicMetadata(uuid.UUID(int=2), "later", 2)}
    assert partitions(beat(group, "a", 1, topics=None, cluster=later)) == {0, 1}


@given(
    members=st.lists(st.text("abcdefgh", min_size=1, max_size=6), min_size=1, max_size=12, unique=True),
    count=st.integers(1, 10),
)
def test_the_assignor_covers_every_partition_and_each_member_reads(members, count):
    topic = uuid.UUID(int=7)
    target = share_assignor.assign({m: {topic} for m in members}, {topic: count}, {})
    covered = {p for a in target.values() for p in a.get(topic, ())}
    assert covered == set(range(count))
    assert all(target[m].get(topic) for m in members)  # no member is left without a partition
    again = share_assignor.assign({m: {topic} for m in members}, {topic: count}, target)
    assert all(target[m][topic] <= again[m][topic] for m in members)  # what a member held it keeps


def test_assigned_partitions_join_the_groups_state_partitions_once():
    group = ShareGroup("jobs")
    first = beat(group, "a", 0)
    assert [r.kind for r in first.records].count(sr.STATE_PARTITION_METADATA) == 1
    assert group.state_partitions.initialized == {ORDERS.topic_id: ("orders", frozenset({0, 1, 2}))}
    second = beat(group, "b", 0)  # the same partitions, shared: nothing new
    assert sr.STATE_PARTITION_METADATA not in [r.kind for r in second.records]
    grown = {"orders": TopicMetadata(ORDERS.topic_id, "orders", 4)}
    beat(group, "a", 1, topics=None, cluster=grown)
    assert group.state_partitions.initialized[ORDERS.topic_id] == ("orders", frozenset({0, 1, 2, 3}))
    beat(group, "a", -1)
    beat(group, "b", -1)  # an empty group keeps them: its state is still at the share coordinator
    assert group.state_partitions.initialized[ORDERS.topic_id][1] == frozenset({0, 1, 2, 3})
    tombstones = [r for r in group.group_tombstones() if r.kind == sr.STATE_PARTITION_METADATA]
    assert len(tombstones) == 1 and tombstones[0].value is None


def test_the_state_partition_record_round_trips_through_its_bytes():
    value = sr.StatePartitionMetadata(
        initializing={uuid.UUID(int=5): ("b", frozenset({1}))},
        initialized={ORDERS.topic_id: ("orders", frozenset({0, 2}))},
        deleting={uuid.UUID(int=9): "gone"},
    )
    record = sr.ShareRecord(sr.STATE_PARTITION_METADATA, "jobs", None, value)
    key, data = sr.encode(record)
    assert sr.is_share_key(key) and sr.decode(key, data) == record
    assert sr.decode(key, None) == sr.ShareRecord(sr.STATE_PARTITION_METADATA, "jobs")
