"""KIP-848's consumer group protocol as pure functions: the heartbeat's decisions, reconciliation,
the assignors, and the records replayed (coordinator/group/consumer_*.py, assignors.py)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.group import consumer_records as cr
from coordinator.group.assignors import MemberSubscription, range_, uniform
from coordinator.group.consumer_group import ConsumerGroup, MemberState, partitions_of
from coordinator.group.consumer_heartbeat import (
    ConsumerGroupLimits,
    HeartbeatError,
    HeartbeatRequest,
    heartbeat,
    remove_member,
)
from coordinator.group.consumer_records import TopicMetadata
from protocol.errors import ErrorCode

LIMITS = ConsumerGroupLimits(
    heartbeat_interval_ms=5000, session_timeout_ms=45000, max_size=3, assignors=("uniform", "range")
)
T1 = TopicMetadata(uuid.UUID(int=1), "t1", 6)
T2 = TopicMetadata(uuid.UUID(int=2), "t2", 3)
TOPICS = {"t1": T1, "t2": T2}


def beat(group: ConsumerGroup, req: HeartbeatRequest, topics=TOPICS, new_id: str = "new"):
    """One heartbeat decided, its records round-tripped through their bytes and replayed."""
    outcome = heartbeat(group, req, topics, LIMITS, new_id)
    for record in outcome.records:
        key, value = cr.encode(record)
        group.replay(cr.decode(key, value))
    return outcome


def join(group, member_id, topics=("t1",), **kw):
    return beat(
        group,
        HeartbeatRequest("g", member_id, 0, rebalance_timeout_ms=30000, subscribed_topic_names=topics, owned={}, **kw),
    )


def ack(group, member_id):
    """A heartbeat reporting that the member owns exactly what it was given."""
    m = group.members[member_id]
    return beat(group, HeartbeatRequest("g", member_id, m.member_epoch, owned=dict(m.assigned)))


def settle(group, rounds=6):
    for _ in range(rounds):
        for mid in list(group.members):
            ack(group, mid)


def test_members_join_reconcile_and_own_each_partition_once():
    g = ConsumerGroup("g")
    first = join(g, "a")
    assert first.member_epoch == 1 and partitions_of(first.assignment) == {(T1.topic_id, p) for p in range(6)}
    join(g, "b")
    join(g, "c")
    assert g.group_epoch == 3 and g.assignment_epoch == 3
    # b and c wait for a to revoke: nothing is owned twice at any time
    assert g.members["a"].state == MemberState.STABLE  # a has not heartbeated since
    settle(g)
    assert g.state == "Stable"
    owned = [tp for m in g.members.values() for tp in partitions_of(m.assigned)]
    assert sorted(owned) == sorted({(T1.topic_id, p) for p in range(6)})
    assert len(owned) == 6 and {len(m.assigned[T1.topic_id]) for m in g.members.values()} == {2}
    assert all(m.member_epoch == 3 for m in g.members.values())


def test_a_partition_moves_only_after_its_owner_revoked_it():
    g = ConsumerGroup("g")
    join(g, "a")
    out = join(g, "b")
    assert out.member_epoch == 2 and out.assignment == {}  # its partitions are still a's
    assert g.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    # a learns it must revoke: its epoch stays until it reports having revoked
    a = g.members["a"]
    out = beat(g, HeartbeatRequest("g", "a", a.member_epoch, owned=dict(a.assigned)))
    assert out.member_epoch == 1 and len(partitions_of(out.assignment)) == 3
    assert g.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    # b still gets nothing while a holds them
    assert beat(g, HeartbeatRequest("g", "b", 2, owned={})).assignment in (None, {})
    # a reports the revocation: it moves to epoch 2, b gets the released partitions
    out = beat(g, HeartbeatRequest("g", "a", 1, owned=dict(g.members["a"].assigned)))
    assert out.member_epoch == 2
    out = beat(g, HeartbeatRequest("g", "b", 2, owned={}))
    assert len(partitions_of(out.assignment)) == 3 and g.members["b"].state == MemberState.STABLE


def test_fencing_and_unknown_members():
    g = ConsumerGroup("g")
    join(g, "a")
    with pytest.raises(HeartbeatError) as e:
        beat(g, HeartbeatRequest("g", "a", 7, owned={}))
    assert e.value.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(HeartbeatError) as e:
        beat(g, HeartbeatRequest("g", "zz", 1))
    assert e.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    join(g, "b")
    join(g, "c")
    with pytest.raises(HeartbeatError) as e:
        join(g, "d")
    assert e.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


@pytest.mark.parametrize(
    "req, error",
    [
        (
            HeartbeatRequest("", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t1",), owned={}),
            ErrorCode.INVALID_REQUEST,
        ),
        (HeartbeatRequest("g", "", 0, subscribed_topic_names=("t1",), owned={}), ErrorCode.INVALID_REQUEST),
        (HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, owned={}), ErrorCode.INVALID_REQUEST),
        (HeartbeatRequest("g", "x", 3), ErrorCode.UNKNOWN_MEMBER_ID),
        (HeartbeatRequest("g", "x", -2), ErrorCode.INVALID_REQUEST),
        (HeartbeatRequest("g", "x", -3), ErrorCode.INVALID_REQUEST),
        (
            HeartbeatRequest(
                "g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=(), server_assignor="sticky", owned={}
            ),
            ErrorCode.UNSUPPORTED_ASSIGNOR,
        ),
        (
            HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t(", owned={}),
            ErrorCode.INVALID_REGULAR_EXPRESSION,
        ),
        (
            HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex=r"(t)\1", owned={}),
            ErrorCode.INVALID_REGULAR_EXPRESSION,
        ),
        (
            HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex=r"(?>t.*)", owned={}),
            ErrorCode.INVALID_REGULAR_EXPRESSION,
        ),
        (
            HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_regex=r"t(?=x)", owned={}),
            ErrorCode.INVALID_REGULAR_EXPRESSION,
        ),
    ],
)
def test_invalid_requests_are_refused_with_kafkas_codes(req, error):
    with pytest.raises(HeartbeatError) as e:
        heartbeat(ConsumerGroup("g"), req, TOPICS, LIMITS, "new")
    assert e.value.error_code == error


def test_leave_bumps_the_epoch_and_the_rest_take_over():
    g = ConsumerGroup("g")
    join(g, "a")
    join(g, "b")
    settle(g)
    out = beat(g, HeartbeatRequest("g", "a", g.members["a"].member_epoch))
    out = beat(g, HeartbeatRequest("g", "a", -1))
    assert out.member_epoch == -1 and "a" not in g.members and g.group_epoch == 3
    settle(g)
    assert partitions_of(g.members["b"].assigned) == {(T1.topic_id, p) for p in range(6)}


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance():
    g = ConsumerGroup("g")
    join(g, "a", instance_id="i-a")
    join(g, "b", instance_id="i-b")
    settle(g)
    before = dict(g.members["a"].assigned)
    epoch = g.group_epoch
    out = beat(g, HeartbeatRequest("g", "a", -2, instance_id="i-a"))
    assert out.member_epoch == -2 and g.members["a"].assigned == before
    with pytest.raises(HeartbeatError) as e:  # b's instance is held by a live member
        join(g, "b2", instance_id="i-b")
    assert e.value.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    out = join(g, "a2", instance_id="i-a")
    assert out.assignment == before and out.member_epoch == epoch
    assert "a" not in g.members and g.group_epoch == epoch and g.static_members["i-a"] == "a2"


def test_a_regex_subscription_follows_the_topics_created():
    g = ConsumerGroup("g")
    out = beat(g, HeartbeatRequest("g", "a", 0, rebalance_timeout_ms=1, subscribed_topic_regex="t.*", owned={}))
    assert {t for t, _ in partitions_of(out.assignment)} == {T1.topic_id, T2.topic_id}
    t3 = TopicMetadata(uuid.UUID(int=3), "t3", 2)
    out = beat(g, HeartbeatRequest("g", "a", out.member_epoch), topics={**TOPICS, "t3": t3})
    assert (t3.topic_id, 1) in partitions_of(out.assignment)
    out = beat(g, HeartbeatRequest("g", "a", out.member_epoch, owned=dict(g.members["a"].assigned)), topics={"t3": t3})
    # topics deleted: their partitions are revoked first
    assert g.members["a"].state == MemberState.UNREVOKED_PARTITIONS


def test_session_removal_records_round_trip_and_the_group_replays_to_the_same_state():
    g = ConsumerGroup("g")
    log: list[tuple[bytes, bytes | None]] = []
    for mid in ("a", "b", "c"):
        log += [cr.encode(r) for r in join(g, mid, topics=("t1", "t2")).records]
    for _ in range(4):
        for mid in list(g.members):
            m = g.members[mid]
            log += [
                cr.encode(r)
                for r in beat(g, HeartbeatRequest("g", mid, m.member_epoch, owned=dict(m.assigned))).records
            ]
    for r in remove_member(g, "b", TOPICS):
        log.append(cr.encode(r))
        g.replay(r)
    replayed = ConsumerGroup("g")
    for key, value in log:
        replayed.replay(cr.decode(key, value))
    assert replayed.members == g.members and replayed.target == g.target
    assert (replayed.group_epoch, replayed.assignment_epoch) == (g.group_epoch, g.assignment_epoch)
    assert replayed.subscription_metadata == g.subscription_metadata


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=2),
        st.sets(st.sampled_from([1, 2, 3]), min_size=1),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([uniform, range_]),
)
def test_assignors_give_every_subscribed_partition_to_exactly_one_subscriber(subs, assignor):
    topics = {uuid.UUID(int=1): 7, uuid.UUID(int=2): 3, uuid.UUID(int=3): 0}
    members = {m: MemberSubscription(frozenset(uuid.UUID(int=t) for t in ts), {}) for m, ts in subs.items()}
    out = assignor(members, topics)
    seen = [(t, p, m) for m, a in out.items() for t, ps in a.items() for p in ps]
    wanted = {(t, p) for t, n in topics.items() for p in range(n) if any(t in s.topics for s in members.values())}
    assert sorted((t, p) for t, p, _ in seen) == sorted(wanted)
    assert all(t in members[m].topics for t, _, m in seen)
    if assignor is uniform and len({frozenset(s.topics) for s in members.values()}) == 1:
        counts = [sum(len(ps) for ps in a.values()) for a in out.values()]
        assert max(counts) - min(counts) <= 1


def test_uniform_is_sticky_when_a_member_joins():
    t = uuid.UUID(int=1)
    before = uniform({m: MemberSubscription(frozenset({t}), {}) for m in "ab"}, {t: 12})
    after = uniform(
        {
            **{m: MemberSubscription(frozenset({t}), before[m]) for m in "ab"},
            "c": MemberSubscription(frozenset({t}), {}),
        },
        {t: 12},
    )
    assert all(after[m][t] <= before[m][t] for m in "ab")
    assert [len(after[m][t]) for m in "abc"] == [4, 4, 4]


@pytest.mark.parametrize(
    "props, message",
    [
        ({"group.consumer.session.timeout.ms": "1000"}, "must be within"),
        ({"group.consumer.heartbeat.interval.ms": "100"}, "must be within"),
        ({"group.consumer.min.session.timeout.ms": "70000"}, "must not exceed"),
        (
            {
                "group.consumer.heartbeat.interval.ms": "10000",
                "group.consumer.session.timeout.ms": "10000",
                "group.consumer.min.session.timeout.ms": "1000",
            },
            "must be less than",
        ),
        ({"group.consumer.assignors": "sticky"}, "must name assignors"),
        ({"group.consumer.migration.policy": "sideways"}, "must be one of"),
        ({"group.coordinator.rebalance.protocols": "consumer"}, "must list classic"),
    ],
)
def test_consumer_group_keys_are_checked_as_kafka_checks_them(props, message):
    from broker.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=message):
        build_config({"broker.id": "1", "zookeeper.connect": "zk:2181", **props})


def test_consumer_group_keys_have_kafkas_defaults():
    from broker.config import build_config

    c = build_config({"broker.id": "1", "zookeeper.connect": "zk:2181"})
    assert c["group.consumer.heartbeat.interval.ms"] == 5000 and c["group.consumer.session.timeout.ms"] == 45000
    assert c["group.consumer.assignors"] == ["uniform", "range"]
    assert c["group.consumer.migration.policy"] == "bidirectional"
    assert c["group.coordinator.rebalance.protocols"] == ["classic", "consumer"]


def test_a_nullable_struct_is_a_marker_byte_then_the_struct():
    from protocol.schemas import consumer_group_heartbeat as hb

    compiled = hb.RESPONSE[1].compile()
    import io

    def wire(assignment):
        out = io.BytesIO()
        compiled.buildfunc({"member_epoch": 1, "assignment": assignment}, out, None)
        return out.getvalue()

    assert wire(None)[-2:] == b"\xff\x00"  # null marker, then the tagged-field count
    present = wire({"topic_partitions": []})
    assert present[-4:] == b"\x01\x01\x00\x00"  # present, an empty compact array, the two tag sections


def test_a_heartbeat_that_changes_nothing_does_not_recompute_the_subscription(monkeypatch):
    from coordinator.group import consumer_heartbeat

    g = ConsumerGroup("g")
    join(g, "a")
    join(g, "b", topics=("t1", "t2"))
    settle(g)
    calls = []
    real = consumer_heartbeat._subscription_metadata
    monkeypatch.setattr(consumer_heartbeat, "_subscription_metadata", lambda *a: calls.append(1) or real(*a))
    for _ in range(3):
        ack(g, "a")
    assert calls == []  # known to hold for the same topics since the group settled
    t3 = TopicMetadata(uuid.UUID(int=3), "t3", 2)
    m = g.members["a"]
    beat(g, HeartbeatRequest("g", "a", m.member_epoch, owned=dict(m.assigned)), topics={**TOPICS, "t3": t3})
    assert len(calls) == 1  # other topics: computed again
    beat(g, HeartbeatRequest("g", "a", g.members["a"].member_epoch, subscribed_topic_names=("t1", "t2")))
    assert len(calls) == 2 and g.subscription_metadata == {"t1": T1, "t2": T2}  # a's subscription changed
