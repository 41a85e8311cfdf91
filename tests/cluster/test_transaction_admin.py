"""The operators' transaction APIs on a real broker: DescribeTransactions (65), ListTransactions
(66) with its filters, DescribeProducers (61), and `minikafka transactions` (like
kafka-transactions.sh) showing an open transaction, then its completion; `minikafka consume
--isolation-level` reading it."""

import subprocess
import sys

import pytest
from admin_helpers import raw, wait
from group_helpers import create_topics
from txn_helpers import TIMEOUT, TXN_BROKER

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow


def cli(bootstrap: str, *args: str) -> list[list[str]]:
    r = subprocess.run(
        [sys.executable, "-m", "minikafka_cli.main", "transactions", "--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def test_transactions_are_visible_to_operators(start_broker):
    from confluent_kafka import Producer

    broker = start_broker(1, **TXN_BROKER)
    create_topics(broker.bootstrap, {"ops": 2})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ops-tx"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce("ops", value=b"x", partition=1)
    assert producer.flush(TIMEOUT) == 0

    def consume(isolation: str) -> list[str]:
        r = subprocess.run(
            [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", broker.bootstrap]
            + ["--topic", "ops", "--from-beginning", "--timeout-ms", "1500", "--isolation-level", isolation],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert consume("read_committed") == []  # the open transaction is not readable yet
    assert consume("read_uncommitted") == ["x"]

    listed = cli(broker.bootstrap, "list")
    assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert listed[1][0] == "ops-tx" and listed[1][3] == "Ongoing"
    pid = int(listed[1][2])
    described = dict(zip(*cli(broker.bootstrap, "describe", "--transactional-id", "ops-tx")))
    assert described["TransactionState"] == "Ongoing" and described["TopicPartitions"] == "ops-1"
    assert int(described["ProducerId"]) == pid and described["ProducerEpoch"] == "0"
    producers = dict(zip(*cli(broker.bootstrap, "describe-producers", "--topic", "ops", "--partition", "1")))
    assert int(producers["ProducerId"]) == pid and producers["CurrentTransactionStartOffset"] == "0"

    producer.commit_transaction(TIMEOUT)
    wait(
        lambda: (
            dict(zip(*cli(broker.bootstrap, "describe", "--transactional-id", "ops-tx")))["TransactionState"]
            == "CompleteCommit"
        ),
        "the commit to complete",
    )
    producers = dict(zip(*cli(broker.bootstrap, "describe-producers", "--topic", "ops", "--partition", "1")))
    assert producers["CurrentTransactionStartOffset"] == "None"
    assert consume("read_committed") == ["x"]  # and never the marker
    assert consume("read_uncommitted") == ["x"]

    # the raw APIs: filters, unknown state names, unknown ids, v0 without the duration filter
    body = {"state_filters": ["CompleteCommit", "Bogus"], "producer_id_filters": [], "duration_filter": -1}
    r = raw(broker, ApiKey.LIST_TRANSACTIONS, body, version=1)
    assert [t.transactional_id for t in r.transaction_states] == ["ops-tx"] and r.unknown_state_filters == ["Bogus"]
    r = raw(broker, ApiKey.LIST_TRANSACTIONS, {"state_filters": ["Ongoing"], "producer_id_filters": []}, version=0)
    assert r.transaction_states == []
    r = raw(broker, ApiKey.LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [pid + 1]}, version=0)
    assert r.transaction_states == []
    r = raw(broker, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ["nobody"]})
    assert r.transaction_states[0].error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    r = raw(broker, ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": "missing", "partition_indexes": [0]}]})
    assert r.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
