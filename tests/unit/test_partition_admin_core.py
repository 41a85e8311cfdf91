"""The socket-free cores of CreatePartitions and partition reassignment: Kafka's checks and
placement for new partitions, the reassignment plan (KIP-455), and the ZooKeeper JSON they use."""

import uuid

import pytest

from controller.reassignment import check_target, plan
from controller.topics import TopicError, plan_new_partitions
from protocol.errors import ErrorCode
from zk import znodes


def test_new_partitions_continue_the_placement():
    current = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
    added = plan_new_partitions("t", current, 6, None, [1, 2, 3])
    assert sorted(added) == [3, 4, 5]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    assert sorted(r[0] for r in added.values()) == [1, 2, 3], "new leaders spread over the brokers"
    assert plan_new_partitions("t", current, 4, [[1, 3]], [1, 2, 3]) == {3: [1, 3]}


@pytest.mark.parametrize(
    "count,manual,live,code",
    [
        (3, None, [1, 2, 3], ErrorCode.INVALID_PARTITIONS),
        (2, None, [1, 2, 3], ErrorCode.INVALID_PARTITIONS),
        (5, [[1, 2]], [1, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (4, [[1, 7]], [1, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (4, [[1, 1]], [1, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (4, [[1]], [1, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (4, None, [1], ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_new_partitions_refused(count, manual, live, code):
    with pytest.raises(TopicError) as e:
        plan_new_partitions("t", {0: [1, 2], 1: [2, 3], 2: [3, 1]}, count, manual, live)
    assert e.value.error_code == code


def test_reassignment_plan():
    full, r = plan([1, 2, 3], [2, 3, 4])
    assert full == [2, 3, 4, 1] and r.adding == [4] and r.removing == [1] and r.target == [2, 3, 4]
    full, r = plan([1, 2], [1, 2])
    assert full == [1, 2] and r.adding == [] and r.removing == []
    full, r = plan([1, 2], [3, 4], legacy=True)
    assert full == [3, 4, 1, 2] and r.adding == [3, 4] and r.removing == [1, 2] and r.legacy
    assert check_target([], {1}) and check_target([1, 1], {1}) and "9" in check_target([1, 9], {1, 2})
    assert check_target([2, 1], {1, 2}) is None


def test_reassignment_state_in_zookeeper():
    topic_id = uuid.uuid4()
    data = znodes.encode_topic_assignment({0: [2, 3, 4, 1], 1: [1, 2]}, topic_id, {0: [4]}, {0: [1], 1: []})
    assert znodes.decode_topic_assignment(data) == ({0: [2, 3, 4, 1], 1: [1, 2]}, topic_id)
    assert znodes.decode_reassignment_state(data) == ({0: [4]}, {0: [1]})
    legacy = znodes.encode_reassign_partitions({("t", 0): [2, 3]})
    assert znodes.decode_reassign_partitions(legacy) == {("t", 0): [2, 3]}
    with pytest.raises(ValueError):
        znodes.decode_reassign_partitions(b'{"version":1}')
    assert znodes.decode_config_change(znodes.encode_config_change("topics", "t")) == ("topics", "t")
    assert znodes.decode_config_change(b'{"version":1,"entity_type":"brokers","entity_name":"1"}') == ("brokers", "1")
    with pytest.raises(ValueError):
        znodes.decode_config_change(b'{"version":2,"entity_path":"topics"}')
