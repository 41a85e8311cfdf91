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


def test_a_member_joins_and_gets_every_partition_then_a_second_takes_a_share():
    group = ShareGroup("jobs")
    a = beat(group, "a", 0)
    assert (a.member_epoch, partitions(a)) == (1, {0, 1, 2})
    assert group.exists and group.group_epoch == 1 and group.state == "Stable"
    b = beat(group, "b", 0)  # 3 partitions over 2 members: "a" (first by id) keeps 2, "b" gets 1
    assert b.member_epoch == 2 and partitions(b) == {2}
    assert group.members["a"].assigned == {ORDERS.topic_id: frozenset({0, 1, 2})}  # until it heartbeats
    again = beat(group, "a", 1, topics=None)  # its next heartbeat brings the new epoch and gives up 2
    assert again.member_epoch == 2 and partitions(again) == {0, 1}
    assert group.members["a"].assigned == {ORDERS.topic_id: frozenset({0, 1})}
    quiet = beat(group, "a", 2, topics=None)  # nothing changed since: no assignment in the answer
    assert quiet.member_epoch == 2 and quiet.assignment is None


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
def test_the_assignor_covers_every_partition_balanced_and_sticky(members, count):
    topic = uuid.UUID(int=7)
    target = share_assignor.assign({m: {topic} for m in members}, {topic: count}, {})
    covered = {p for a in target.values() for p in a.get(topic, ())}
    assert covered == set(range(count))
    assert all(target[m].get(topic) for m in members)  # no member is left without a partition
    sizes = [len(target[m][topic]) for m in members]
    assert max(sizes) - min(sizes) <= 1  # balanced
    readers = [sum(p in target[m][topic] for m in members) for p in range(count)]
    assert max(readers) == -(-len(members) // count)  # shared only when members outnumber partitions
    again = share_assignor.assign({m: {topic} for m in members}, {topic: count}, target)
    assert again == target  # a balanced assignment stays as it is
    joined = share_assignor.assign({m: {topic} for m in [*members, "~new"]}, {topic: count}, target)
    assert joined["~new"][topic]
    for m in members:  # sticky: a member only gives up partitions or only gains them, never swaps
        assert joined[m][topic] <= target[m][topic] or target[m][topic] <= joined[m][topic]


def test_members_subscribed_to_different_topics_balance_each_topic_apart():
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    target = share_assignor.assign({"a": {t1}, "b": {t2}, "c": {t1, t2}}, {t1: 4, t2: 2}, {})
    assert set(target["a"]) == {t1} and set(target["b"]) == {t2} and set(target["c"]) == {t1, t2}
    assert len(target["a"][t1]) == len(target["c"][t1]) == 2 and target["a"][t1] | target["c"][t1] == {0, 1, 2, 3}
    assert len(target["b"][t2]) == len(target["c"][t2]) == 1 and target["b"][t2] | target["c"][t2] == {0, 1}
    # a member that leaves a topic gives its partitions back to the others subscribed to it
    after = share_assignor.assign({"a": {t1}, "b": {t2}, "c": {t2}}, {t1: 4, t2: 2}, target)
    assert after["a"] == {t1: frozenset({0, 1, 2, 3})} and after["c"] == {t2: target["c"][t2]}


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
