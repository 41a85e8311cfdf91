"""Transactions across failures, on real 3-broker clusters with unmodified clients:
- kill -9 of the transaction coordinator after EndTxn was answered but before its markers were
  written: the new coordinator finds PrepareCommit in `__transaction_state` and completes the
  commit; a read_committed consumer sees the whole transaction;
- kill -9 of a partition leader mid-transaction: the transaction commits whole or aborts whole."""

import os
import signal
import threading
import time

import pytest
from admin_helpers import wait
from group_helpers import GROUP_BROKER
from txn_helpers import TIMEOUT, consume_all

pytestmark = pytest.mark.slow

CLUSTER = GROUP_BROKER | {
    "transaction_state_log_replication_factor": 2,
    "transaction_state_log_min_isr": 1,
    "transaction_state_log_num_partitions": 1,
    "zookeeper_session_timeout_ms": 6000,  # a broker stopped for a moment keeps its session
    "replica_lag_time_max_ms": 3000,
}


def _leaders(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=TIMEOUT)
    return {p.id: (p.leader, list(p.isrs)) for p in md.topics[topic].partitions.values()}


def _admin(bootstrap: str, brokers: int = 3):
    """An AdminClient once a controller and `brokers` brokers are known (librdkafka waits long for
    a controller it was told is -1; an RF 3 topic needs all 3 registered)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait(
        lambda: (md := admin.list_topics(timeout=TIMEOUT)).controller_id >= 0 and len(md.brokers) >= brokers,
        f"a controller and {brokers} brokers",
    )
    return admin


def test_new_coordinator_completes_a_commit_whose_markers_were_not_written(start_broker):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    brokers = {i: start_broker(i, **CLUSTER) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "survivor", "linger.ms": 5})
    producer.init_transactions(TIMEOUT)  # creates __transaction_state (1 partition, RF 2)
    coordinator, isr = _leaders(bootstrap, "__transaction_state")[0]
    wait(lambda: len(_leaders(bootstrap, "__transaction_state")[0][1]) == 2, "the transaction log's ISR")
    (data_leader,) = {1, 2, 3} - set(_leaders(bootstrap, "__transaction_state")[0][1])
    admin = _admin(bootstrap)
    created = admin.create_topics([NewTopic("d", num_partitions=1, replica_assignment=[[data_leader]])])
    created["d"].result(TIMEOUT)

    producer.begin_transaction()
    for i in range(10):
        producer.produce("d", value=b"%d" % i)
    assert producer.flush(TIMEOUT) == 0
    # the data partition's leader cannot take markers now; the commit is decided all the same
    os.kill(brokers[data_leader].process.pid, signal.SIGSTOP)
    try:
        producer.commit_transaction(TIMEOUT)  # EndTxn is answered once PrepareCommit is written
        brokers[coordinator].kill()
    finally:
        os.kill(brokers[data_leader].process.pid, signal.SIGCONT)
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if i != coordinator)
    got = consume_all(survivors, "d", "read_committed", expected=10)
    assert sorted(int(v) for _, v in got) == list(range(10))


def test_leader_kill_mid_transaction_commits_or_aborts_whole(start_broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import NewTopic

    brokers = {i: start_broker(i, **CLUSTER) for i in (1, 2, 3)}
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = _admin(bootstrap)
    created = admin.create_topics(
        [NewTopic("m", num_partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})]
    )
    created["m"].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "mid", "linger.ms": 2})
    producer.init_transactions(TIMEOUT)
    leader = _leaders(bootstrap, "m")[0][0]  # partition 0's leader (it may coordinate the transaction too)
    outcomes = []
    killed = threading.Event()
    for txn in range(6):
        producer.begin_transaction()
        failed = None
        for i in range(50):
            try:
                producer.produce("m", value=b"%d-%d" % (txn, i), partition=i % 2)
            except KafkaException as e:
                # a batch already failed (e.g. NETWORK_EXCEPTION from a leader whose verification
                # question went to the killed coordinator): the transaction is in its abortable
                # error state and produce() refuses more, as it does against Kafka
                assert e.args[0].code() == KafkaError._STATE and killed.is_set(), e
                failed = e
                break
            if txn == 2 and i == 25:
                brokers[leader].kill()
                killed.set()
            time.sleep(0.001)
        if failed is None:
            try:
                producer.commit_transaction(TIMEOUT)
                outcomes.append(True)
                continue
            except KafkaException as e:
                assert e.args[0].txn_requires_abort(), e
        producer.abort_transaction(TIMEOUT)
        outcomes.append(False)
    survivors = ",".join(b.bootstrap for i, b in brokers.items() if not (killed.is_set() and i == leader))
    committed = [t for t, ok in enumerate(outcomes) if ok]
    got = consume_all(survivors, "m", "read_committed", expected=50 * len(committed))
    by_txn: dict[int, list[int]] = {}
    for _, v in got:
        t, i = map(int, v.split(b"-"))
        by_txn.setdefault(t, []).append(i)
    assert set(by_txn) == set(committed), (outcomes, sorted(by_txn))
    assert outcomes[:2] == [True, True] and any(outcomes[3:]), outcomes
    for t, values in by_txn.items():
        assert sorted(values) == list(range(50)), f"transaction {t} is not whole (or has duplicates)"
