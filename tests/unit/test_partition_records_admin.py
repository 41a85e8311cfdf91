"""DeleteRecords on a Partition and what followers do with its result. Pure: real logs in a temp dir,
no sockets."""

import pytest

from broker.errors import PolicyViolation
from broker.partition import Partition
from protocol import record_batch as rb
from storage.config import LogConfig
from storage.errors import InvalidAppendOffset, OffsetOutOfRange
from storage.log import Log


def state(leader, isr=(1, 2), replicas=(1, 2)):
    return {
        "leader": leader,
        "leader_epoch": 1,
        "partition_epoch": 1,
        "controller_epoch": 1,
        "isr": list(isr),
        "replicas": list(replicas),
    }


@pytest.fixture
def leader(tmp_path):
    partition = Partition("t", 0, 1, Log.create(tmp_path / "leader" / "t-0", LogConfig()))
    partition.make_leader(state(1))
    partition.append_records_as_leader(rb.build_batch([(None, b"v")] * 10), 1, 1)  # one batch, 0..9
    partition.update_follower_fetch(2, 10)
    yield partition
    partition.log.close()


def test_delete_records_inside_a_batch_and_the_low_watermark(leader):
    assert leader.high_watermark == 10
    assert leader.delete_records_on_leader(4) == 4 and leader.log.log_start_offset == 4
    assert leader.low_watermark() == 4  # the follower has not reported a log start offset yet
    leader.update_follower_log_start(2, 0)
    assert leader.low_watermark() == 0
    leader.update_follower_log_start(2, 4)
    assert leader.low_watermark() == 4
    assert leader.delete_records_on_leader(-1) == 10  # -1: the high watermark
    with pytest.raises(OffsetOutOfRange):
        leader.delete_records_on_leader(11)
    with pytest.raises(OffsetOutOfRange):
        leader.delete_records_on_leader(-5)


def test_a_compact_only_topic_refuses(tmp_path):
    partition = Partition("c", 0, 1, Log.create(tmp_path / "c-0", LogConfig(cleanup_policy=("compact",))))
    partition.make_leader(state(1, isr=(1,), replicas=(1,)))
    with pytest.raises(PolicyViolation):
        partition.delete_records_on_leader(0)
    partition.log.close()


def test_an_empty_follower_starting_inside_the_leaders_first_batch(leader, tmp_path):
    """Kafka's UnexpectedAppendOffsetException recovery: the follower starts at the leader's log
    start (4, inside the batch 0..9), the leader sends the whole batch, and the follower takes it
    by starting its log at the batch, then at the leader's log start."""
    leader.delete_records_on_leader(4)
    follower = Partition("t", 0, 2, Log.create(tmp_path / "follower" / "t-0", LogConfig()))
    follower.make_follower(state(1))
    follower.truncate_fully_and_start_at(4)
    batch = leader.read(4, 1 << 20, committed_only=False, min_one_batch=True).records
    follower.append_records_as_follower(batch, 10, 4)
    assert (follower.log.log_start_offset, follower.log.log_end_offset) == (4, 10)
    # a follower that is not empty still refuses a batch below its end
    with pytest.raises(InvalidAppendOffset):
        follower.append_records_as_follower(batch, 10, 4)
    follower.log.close()
