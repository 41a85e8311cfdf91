"""A static member (KIP-345) closed without LeaveGroup expires at its last heartbeat plus its
session timeout, as in Kafka, and its group is Empty then; an OffsetCommit in Stable keeps the
session as a heartbeat does (Kafka's `GroupCoordinator.doCommitOffsets` calls
`completeAndScheduleNextHeartbeatExpiration`; the new coordinator's `rescheduleClassicGroupMemberHeartbeat`),
so a consumer that commits on close expires one session timeout after the close. Judged with
confluent-kafka consumers (librdkafka's close of a static member sends no LeaveGroup)."""

import time

import pytest
from group_helpers import GROUP_BROKER, create_topics, produce

pytestmark = pytest.mark.slow
SESSION_S = 6.0
HEARTBEAT_S = 1.0
SLACK_S = 0.6  # the coordinator's 0.1 s session sweep, the request round trips, the 0.1 s polling


def _expiry_after_close(bootstrap: str, group: str, commit_on_close: bool) -> float:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    members = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.instance.id": f"{group}-{i}",
                "session.timeout.ms": int(SESSION_S * 1000),
                "heartbeat.interval.ms": int(HEARTBEAT_S * 1000),
                "auto.offset.reset": "earliest",
                "enable.auto.commit": commit_on_close,
                "auto.commit.interval.ms": 60000,
            }
        )
        for i in range(3)
    ]
    for m in members:
        m.subscribe(["static"])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for m in members:
            m.poll(0.1)
        described = admin.describe_consumer_groups([group])[group].result(10)
        if len(described.members) == 3 and str(described.state).endswith("STABLE"):
            break
    for _ in range(20):  # consume what is there, so that a close has offsets to commit
        for m in members:
            m.poll(0.05)
    for m in members:
        m.close()
    closed = time.monotonic()
    while time.monotonic() < closed + 30:
        if not admin.describe_consumer_groups([group])[group].result(10).members:
            return time.monotonic() - closed
        time.sleep(0.1)
    raise AssertionError("the closed static members never expired")


def test_closed_static_members_expire_one_session_after_their_last_heartbeat(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"static": 3})
    produce(broker.bootstrap, "static", [str(i).encode() for i in range(30)], partitions=3)
    # no commit at close: the last heartbeat came at most one heartbeat interval before it
    quiet = _expiry_after_close(broker.bootstrap, "quiet", commit_on_close=False)
    assert SESSION_S - HEARTBEAT_S - SLACK_S <= quiet <= SESSION_S + SLACK_S, quiet
    # librdkafka commits at close: that commit is the last sign of life
    committing = _expiry_after_close(broker.bootstrap, "committing", commit_on_close=True)
    assert SESSION_S - SLACK_S <= committing <= SESSION_S + SLACK_S, committing
