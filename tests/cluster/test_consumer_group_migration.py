"""Online migration between classic and consumer groups (KIP-848,
`group.consumer.migration.policy=bidirectional`): a group of classic members (confluent-kafka with
the classic protocol, and kafka-python) is upgraded member by member to the consumer protocol and
back, without stopping, and reads every record exactly once."""

import threading
import time

import pytest
from admin_helpers import raw, wait
from group_helpers import create_topics, produce
from member_processes import CONSUMER_BROKER, all_partitions, shared_exactly_once

from protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow

CLASSIC = {"protocol": "classic", "partition.assignment.strategy": "range", "session.timeout.ms": 6000}


def _group_type(broker, group: str) -> str | None:
    listed = raw(broker, ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []}, version=5)
    return next((g.group_type for g in listed.groups if g.group_id == group), None)


class Producer:
    """Produces numbered records to `topic` in the background until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.sent: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, partitions), daemon=True)
        self._thread.start()

    def _run(self, bootstrap, topic, partitions):
        i = 0
        while not self._stop.is_set():
            batch = [f"m{i + k}" for k in range(10)]
            produce(bootstrap, topic, [v.encode() for v in batch], partitions=partitions)
            self.sent += batch
            i += 10
            time.sleep(0.2)

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(60)
        return self.sent


def test_a_group_upgraded_member_by_member_and_back_reads_every_record_once(start_broker, members):
    broker = start_broker(1, **CONSUMER_BROKER)
    create_topics(broker.bootstrap, {"mig": 6})
    wanted = all_partitions("mig", 6)
    a1 = members(broker.bootstrap, "mg", ["mig"], **CLASSIC)
    a2 = members(broker.bootstrap, "mg", ["mig"], **CLASSIC)
    wait(lambda: shared_exactly_once([a1, a2], wanted), "two classic members to share 6 partitions", 60)
    assert _group_type(broker, "mg") == "classic"
    producer = Producer(broker.bootstrap, "mig", 6)
    steps = []

    # upgrade: a consumer-protocol member joins the classic group, then the classic ones leave
    b1 = members(broker.bootstrap, "mg", ["mig"])
    wait(lambda: shared_exactly_once([a1, a2, b1], wanted), "a classic group with a consumer member", 90)
    steps.append(_group_type(broker, "mg"))
    a1.stop()
    wait(lambda: shared_exactly_once([a2, b1], wanted), "a2 and b1 to share", 90)
    b2 = members(broker.bootstrap, "mg", ["mig"])
    a2.stop()
    wait(lambda: shared_exactly_once([b1, b2], wanted), "consumer members only", 90)
    steps.append(_group_type(broker, "mg"))

    # and back: a classic member joins, the consumer members leave; the group is classic again
    a3 = members(broker.bootstrap, "mg", ["mig"], **CLASSIC)
    wait(lambda: shared_exactly_once([b1, b2, a3], wanted), "a consumer group with a classic member", 90)
    b1.stop()
    b2.stop()
    wait(lambda: a3.assigned == wanted, "the classic member to own everything", 90)
    a4 = members(broker.bootstrap, "mg", ["mig"], **CLASSIC)
    wait(lambda: shared_exactly_once([a3, a4], wanted), "two classic members again", 90)
    steps.append(_group_type(broker, "mg"))

    sent = producer.stop()
    everyone = [a1, a2, b1, b2, a3, a4]
    wait(lambda: len({r[3] for m in everyone for r in m.records}) >= len(sent), "every record read", 90)
    time.sleep(1)
    read = sorted(r[3] for m in everyone for r in m.records)
    assert steps == ["consumer", "consumer", "classic"]
    from collections import Counter

    twice = [v for v, n in Counter(read).items() if n > 1]
    where = {v: [(i, r[1], r[2]) for i, m in enumerate(everyone) for r in m.records if r[3] == v] for v in twice}
    assert read == sorted(sent), (where, [m.errors for m in everyone])  # every record, exactly once
    assert not [e for m in everyone for e in m.errors if "commit" in e]
