"""The coordinators' topics belong to the broker: no client request appends to `__consumer_offsets`
or `__transaction_state`, none creates one with a plain topic's settings, and every other API that
names a topic answers for them as Kafka 3.8 (ZooKeeper mode) answers:

- Produce: INVALID_TOPIC_EXCEPTION, "Cannot append to internal topic" (`ReplicaManager.appendToLocalLog`);
- DeleteRecords: INVALID_TOPIC_EXCEPTION (`ReplicaManager.deleteRecordsOnLocalLog`);
- Metadata auto-creation and FindCoordinator create them with the coordinator's settings
  (`AutoTopicCreationManager.creatableTopic`); CreateTopics naming one gets the same settings here
  (Kafka's ZooKeeper mode would take the request's, which is how one stray request disabled
  transactions for a whole cluster: see issue 44);
- CreatePartitions, IncrementalAlterConfigs, ElectLeaders, ListOffsets and Fetch are served as for
  any topic (`ZkAdminManager.createPartitions`, `ConfigAdminManager`, `KafkaApis.handleElectLeaders`,
  `handleListOffsetRequest`, `handleFetchRequest` have no internal-topic check; only the ACLs apply).
DeleteTopics of an internal topic is served as Kafka serves it (no check in
`KafkaApis.handleDeleteTopicsRequest`) and is not sent here: it removes the coordinators' state by design.
"""

import subprocess
import time

import pytest
from admin_helpers import raw
from group_helpers import create_topics
from txn_helpers import TIMEOUT, TXN_BROKER, consume_all

from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_names import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC

pytestmark = pytest.mark.slow

INTERNAL = (GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC)
PARTITIONS = TXN_BROKER["transaction_state_log_num_partitions"]
assert TXN_BROKER["offsets_topic_num_partitions"] == PARTITIONS


def end_offsets(broker) -> dict[tuple[str, int], int]:
    """Each internal partition's log end offset (ListOffsets, latest, read_uncommitted)."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": t,
                "partitions": [
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1, "max_num_offsets": 1}
                    for p in range(PARTITIONS)
                ],
            }
            for t in INTERNAL
        ],
    }
    answer = raw(broker, ApiKey.LIST_OFFSETS, body)
    out = {}
    for topic in answer.topics:
        for p in topic.partitions:
            assert p.error_code == ErrorCode.NONE, (topic.name, p)
            out[(topic.name, p.partition_index)] = p.offset
    return out


def topic_settings(bootstrap: str, name: str) -> tuple[int, dict[str, str]]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = len(admin.list_topics(name, timeout=TIMEOUT).topics[name].partitions)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    return partitions, {k: v.value for k, v in configs.items()}


def test_clients_cannot_write_internal_topics_on_a_fresh_cluster(start_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaProducer

    broker = start_broker(1, **TXN_BROKER)
    bootstrap = broker.bootstrap
    # before any application used transactions: confluent-kafka's produce to partition 0 of
    # __transaction_state auto-creates it through Metadata, with the coordinator's settings, and
    # is refused with Kafka's code
    failures: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000})
    producer.produce(TRANSACTION_STATE_TOPIC, b"forged", partition=0, on_delivery=lambda e, m: failures.append(e))
    producer.flush(TIMEOUT)
    assert [e.code() for e in failures] == [ErrorCode.INVALID_TOPIC_EXCEPTION], failures
    # CreateTopics naming __consumer_offsets with a plain topic's settings gets the coordinator's
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(GROUP_METADATA_TOPIC, num_partitions=1, replication_factor=1, config={"cleanup.policy": "delete"})]
    )
    created[GROUP_METADATA_TOPIC].result(TIMEOUT)
    for name in INTERNAL:
        partitions, configs = topic_settings(bootstrap, name)
        assert partitions == PARTITIONS, name
        assert configs["cleanup.policy"] == "compact", name
    assert topic_settings(bootstrap, TRANSACTION_STATE_TOPIC)[1]["min.insync.replicas"] == "1"
    before = end_offsets(broker)
    assert set(before.values()) == {0}

    failures.clear()
    producer.produce(GROUP_METADATA_TOPIC, b"forged", partition=0, on_delivery=lambda e, m: failures.append(e))
    producer.flush(TIMEOUT)
    assert [e.code() for e in failures] == [ErrorCode.INVALID_TOPIC_EXCEPTION], failures
    # kcat: the broker's refusal is its delivery failure
    kcat = subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", GROUP_METADATA_TOPIC, "-p", "1"],
        input=b"forged\n",
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert kcat.returncode != 0 and b"Invalid topic" in kcat.stderr, kcat.stderr
    # kafka-python refuses internal topics itself (its metadata leaves them out of topics()),
    # as it does against Kafka: nothing is sent
    kp = KafkaProducer(bootstrap_servers=bootstrap)
    with pytest.raises(ValueError):
        kp.send(GROUP_METADATA_TOPIC, b"forged", partition=0).get(timeout=TIMEOUT)
    kp.close()
    assert end_offsets(broker) == before

    # a transactional producer and a consumer group started afterwards work
    create_topics(bootstrap, {"app": 2})
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "after-forgery"})
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    for i in range(4):
        txn.produce("app", str(i).encode(), partition=i % 2)
    txn.commit_transaction(TIMEOUT)
    assert sorted(v for _, v in consume_all(bootstrap, "app", "read_committed", expected=4)) == [
        b"0",
        b"1",
        b"2",
        b"3",
    ]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-forgery", "auto.offset.reset": "earliest"})
    consumer.subscribe(["app"])
    seen = 0
    deadline = time.monotonic() + TIMEOUT
    while seen < 4 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            seen += 1
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("app", 0), TopicPartition("app", 1)], TIMEOUT)
    consumer.close()
    assert seen == 4 and sum(tp.offset for tp in committed) >= 4


def test_every_topic_api_answers_for_internal_topics_as_kafka_does(start_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = start_broker(1, **TXN_BROKER)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"data": 1})
    # state in both coordinators: a committed transaction and a group's committed offset
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "hostile"})
    txn.init_transactions(TIMEOUT)
    txn.begin_transaction()
    txn.produce("data", b"v", partition=0)
    txn.commit_transaction(TIMEOUT)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "hostile", "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition("data", 0, 1)], asynchronous=False)
    before = end_offsets(broker)
    assert sum(before[(GROUP_METADATA_TOPIC, p)] for p in range(PARTITIONS)) >= 1
    assert sum(before[(TRANSACTION_STATE_TOPIC, p)] for p in range(PARTITIONS)) >= 1
    batch = rb.build_batch([(b"k", b"forged")])

    for name in INTERNAL:
        for acks in (1, -1):
            produced = raw(
                broker,
                ApiKey.PRODUCE,
                {
                    "transactional_id": None,
                    "acks": acks,
                    "timeout_ms": 5000,
                    "topic_data": [
                        {"name": name, "partition_data": [{"index": p, "records": batch} for p in range(PARTITIONS)]}
                    ],
                },
            )
            for p in produced.responses[0].partition_responses:
                assert p.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, (name, acks, p)
                assert p.error_message == f"Cannot append to internal topic {name}"
        deleted = raw(
            broker,
            ApiKey.DELETE_RECORDS,
            {
                "topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": -1}]}],
                "timeout_ms": 5000,
            },
        )
        assert deleted.topics[0].partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        recreated = raw(
            broker,
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": name,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [{"name": "cleanup.policy", "value": "delete"}],
                    }
                ],
                "timeout_ms": 5000,
                "validate_only": False,
            },
        )
        assert recreated.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        # served as for any topic (validate only: nothing changes)
        more = raw(
            broker,
            ApiKey.CREATE_PARTITIONS,
            {
                "topics": [{"name": name, "count": PARTITIONS + 1, "assignments": None}],
                "timeout_ms": 5000,
                "validate_only": True,
            },
        )
        assert more.results[0].error_code == ErrorCode.NONE, more
        altered = raw(
            broker,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            {
                "resources": [
                    {
                        "resource_type": 2,
                        "resource_name": name,
                        "configs": [{"name": "retention.ms", "config_operation": 0, "value": "86400000"}],
                    }
                ],
                "validate_only": True,
            },
        )
        assert altered.responses[0].error_code == ErrorCode.NONE, altered
        elected = raw(
            broker,
            ApiKey.ELECT_LEADERS,
            {"election_type": 0, "topic_partitions": [{"topic": name, "partitions": [0]}], "timeout_ms": 5000},
        )
        assert elected.replica_election_results[0].partition_result[0].error_code in (
            ErrorCode.NONE,
            ErrorCode.ELECTION_NOT_NEEDED,
        )
    # reading them is allowed (Fetch, ListOffsets): the committed offset's record is there
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False, "check.crcs": True}
    )
    partition = raw_partition_with_data(before)
    reader.assign([TopicPartition(GROUP_METADATA_TOPIC, partition, 0)])
    got = None
    deadline = time.monotonic() + TIMEOUT
    while got is None and time.monotonic() < deadline:
        msg = reader.poll(0.5)
        if msg is not None and not msg.error():
            got = msg
    reader.close()
    assert got is not None

    # nothing was appended or removed, and both coordinators kept their state
    assert end_offsets(broker) == before
    still = Consumer({"bootstrap.servers": bootstrap, "group.id": "hostile", "enable.auto.commit": False})
    assert still.committed([TopicPartition("data", 0)], TIMEOUT)[0].offset == 1
    still.close()
    group.close()
    txn.begin_transaction()
    txn.produce("data", b"w", partition=0)
    txn.commit_transaction(TIMEOUT)
    assert [v for _, v in consume_all(bootstrap, "data", "read_committed", expected=2)] == [b"v", b"w"]


def raw_partition_with_data(offsets: dict[tuple[str, int], int]) -> int:
    return next(p for (t, p), end in sorted(offsets.items()) if t == GROUP_METADATA_TOPIC and end > 0)
