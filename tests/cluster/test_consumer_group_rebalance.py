"""Group membership judged by confluent-kafka consumers in their own processes: 3 members over
12 partitions own every partition exactly once after each rebalance (all join, a clean leave, a
crash detected by the session timeout); a static member (KIP-345) restarted within its session
timeout gets its partitions back without a rebalance; kill -9 of the coordinator broker loses no
committed offset and consumption resumes."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from group_helpers import GROUP_BROKER, TIMEOUT, create_topics, produce

from coordinator.group.records import partition_for

pytestmark = pytest.mark.slow
MEMBER = str(Path(__file__).parents[1] / "helpers" / "group_member.py")
ALL = {("t12", p) for p in range(12)}


class Member:
    """One consumer process and what it last said about its assignment."""

    def __init__(self, bootstrap, group="g", topic="t12", instance=None, assignor="range"):
        args = [sys.executable, MEMBER, bootstrap, group, topic] + ([instance] if instance else [])
        env = dict(os.environ, GROUP_MEMBER_ASSIGNOR=assignor)
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
        self.assigned: set | None = None
        self.events: list[dict] = []
        self.consumed = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            event = json.loads(line)
            self.events.append(event)
            if "owned" in event:
                self.assigned = {tuple(p) for p in event["owned"]}
            elif "consumed" in event:
                self.consumed = event["consumed"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(TIMEOUT)

    def kill(self):
        self.proc.kill()
        self.proc.wait(TIMEOUT)


def wait_for_partitioning(members, timeout=TIMEOUT):
    """Until the live members' assignments are disjoint and cover all 12 partitions."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned = [m.assigned for m in members]
        if all(o is not None for o in owned) and sum(len(o) for o in owned) == 12 and set().union(*owned) == ALL:
            return owned
        time.sleep(0.1)
    tails = [m.events[-6:] for m in members]
    raise AssertionError(f"no complete partitioning: {[m.assigned for m in members]}; last events {tails}")


@pytest.fixture
def broker(start_broker):
    b = start_broker(1, **GROUP_BROKER)
    create_topics(b.bootstrap, {"t12": 12})
    return b


def test_three_members_share_twelve_partitions_through_join_leave_and_crash(broker):
    members = [Member(broker.bootstrap) for _ in range(3)]
    try:
        owned = wait_for_partitioning(members)
        assert sorted(len(o) for o in owned) == [4, 4, 4]
        members[0].stop()  # a clean leave
        owned = wait_for_partitioning(members[1:])
        assert sorted(len(o) for o in owned) == [6, 6]
        members.append(Member(broker.bootstrap))
        wait_for_partitioning(members[1:])
        crashed = time.monotonic()
        members[1].kill()  # no LeaveGroup: the coordinator notices after session.timeout.ms (6 s)
        time.sleep(1)
        owned = wait_for_partitioning(members[2:])
        assert sorted(len(o) for o in owned) == [6, 6]
        assert time.monotonic() - crashed >= 5  # not before the session timeout
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()


def test_restarted_static_member_gets_its_partitions_without_a_rebalance(broker):
    static = Member(broker.bootstrap, instance="host-a")
    other = Member(broker.bootstrap, instance="host-b")
    try:
        owned = wait_for_partitioning([static, other])
        rebalances_before = sum("assigned" in e for e in other.events)
        static.kill()  # static members never leave: the group keeps their slot
        again = Member(broker.bootstrap, instance="host-a")
        wait_for_partitioning([again, other])
        assert again.assigned == owned[0]
        time.sleep(2)
        assert sum("assigned" in e for e in other.events) == rebalances_before  # other was not disturbed
    finally:
        for m in (static, other):
            if m.proc.poll() is None:
                m.kill()
        again.kill()


def _committed(bootstrap, group):
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (f,) = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in f.result(TIMEOUT).topic_partitions}


def _end_offsets(bootstrap):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    ends = {("t12", p): consumer.get_watermark_offsets(TopicPartition("t12", p), TIMEOUT)[1] for p in range(12)}
    consumer.close()
    return ends


def test_kill_9_of_the_coordinator_loses_no_committed_offset(start_broker):
    overrides = GROUP_BROKER | {"offsets_topic_replication_factor": 3, "offsets_topic_num_partitions": 3}
    brokers = {i: start_broker(i, **overrides) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topics(bootstrap, {"t12": 12}, rf=3)
    produce(bootstrap, "t12", [b"a%d" % i for i in range(600)], partitions=12)
    members = [Member(bootstrap) for _ in range(2)]
    try:
        wait_for_partitioning(members)
        deadline = time.monotonic() + TIMEOUT
        while sum(m.consumed for m in members) < 600 and time.monotonic() < deadline:
            time.sleep(0.1)
        before = _committed(bootstrap, "g")
        assert sum(before.values()) == 600
        from confluent_kafka.admin import AdminClient

        meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=TIMEOUT)
        coordinator = meta.topics["__consumer_offsets"].partitions[partition_for("g", 3)].leader
        consumed_before = sum(m.consumed for m in members)
        brokers[coordinator].kill()
        survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != coordinator)
        produce(survivors, "t12", [b"b%d" % i for i in range(600)], partitions=12)
        deadline = time.monotonic() + TIMEOUT
        while sum(m.consumed for m in members) < consumed_before + 600 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sum(m.consumed for m in members) >= consumed_before + 600, (
            [m.events[-5:] for m in members],
            _committed(survivors, "g"),
        )
        ends = _end_offsets(survivors)  # a producer retry across the failover may have duplicated
        deadline = time.monotonic() + TIMEOUT
        while (after := _committed(survivors, "g")) != ends and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(after[tp] >= before[tp] for tp in before), (before, after)
        assert after == ends
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()
