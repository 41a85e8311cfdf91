"""Partition's ISR states (Kafka's CommittedPartitionState / PendingExpandIsr / PendingShrinkIsr):
what acks=-1 and the high watermark count while an ISR change is being written, and what a
failed write leaves. Pure: a real log in a temp dir, no sockets."""

import pytest

from broker.errors import NotEnoughReplicas, NotLeaderOrFollower
from broker.partition import CommittedIsr, Partition, PendingExpandIsr, PendingShrinkIsr
from protocol import record_batch as rb
from storage.config import LogConfig
from storage.errors import OffsetOutOfRange
from storage.log import Log


def state(isr, replicas=(1, 2, 3), epoch=1):
    return {
        "leader": 1,
        "leader_epoch": epoch,
        "partition_epoch": 4,
        "controller_epoch": 1,
        "isr": list(isr),
        "replicas": list(replicas),
    }


@pytest.fixture
def leader(tmp_path):
    partition = Partition("t", 0, 1, Log.create(tmp_path / "t-0", LogConfig()))
    partition.make_leader(state([1, 2]))
    partition.append_records_as_leader(rb.build_batch([(None, b"v")] * 10), 1, 1)
    yield partition
    partition.log.close()


def test_a_shrink_in_flight_still_counts_the_leaving_replica(leader):
    new_isr = leader.prepare_isr_shrink([2])
    assert new_isr == [1] and isinstance(leader.isr_state, PendingShrinkIsr)
    assert leader.isr == [1, 2] and not leader.can_change_isr
    leader.update_follower_fetch(2, 4)
    assert leader.high_watermark == 4  # follower 2 still holds the HW back
    assert leader.commit_isr_update(new_isr, partition_epoch=5)  # the HW moved
    assert leader.isr_state == CommittedIsr((1,)) and leader.partition_epoch == 5 and leader.high_watermark == 10
    with pytest.raises(NotEnoughReplicas):
        leader.append_records_as_leader(rb.build_batch([(None, b"v")]), -1, 2)


def test_an_expand_in_flight_counts_the_joiner_for_the_hw_but_not_for_acks(leader):
    leader.update_follower_fetch(2, 10)
    leader.make_leader(state([1, 2], epoch=2))
    leader.update_follower_fetch(2, 10)
    leader.update_follower_fetch(3, 10)
    assert leader.should_expand_isr(3)
    new_isr = leader.prepare_isr_expand([3])
    assert new_isr == [1, 2, 3] and isinstance(leader.isr_state, PendingExpandIsr)
    assert leader.isr_state.maximal_isr == (1, 2, 3) and leader.isr == [1, 2]
    leader.append_records_as_leader(rb.build_batch([(None, b"v")] * 5), 1, 1)
    leader.update_follower_fetch(2, 15)
    assert leader.high_watermark == 10  # the joiner (LEO 10) is already counted
    with pytest.raises(NotEnoughReplicas):
        leader.append_records_as_leader(rb.build_batch([(None, b"v")]), -1, 3)
    leader.commit_isr_update(new_isr, partition_epoch=6)
    assert leader.isr == [1, 2, 3] and leader.can_change_isr


def test_a_failed_write_keeps_the_committed_isr_and_stops_changes_until_leader_and_isr(leader):
    leader.prepare_isr_shrink([2])
    leader.fail_isr_update()
    assert leader.isr_state == CommittedIsr((1, 2)) and not leader.can_change_isr
    leader.make_leader(state([1, 2], epoch=2))
    assert leader.can_change_isr


def test_follower_appends_take_the_leaders_hw_and_log_start(tmp_path):
    follower = Partition("t", 0, 2, Log.create(tmp_path / "t-0", LogConfig()))
    follower.make_follower(state([1, 2]))
    batches = [bytearray(rb.build_batch([(None, b"v")])) for _ in range(3)]
    for offset, batch in enumerate(batches):
        rb.stamp_batch(batch, 0, offset, 1)
    follower.append_records_as_follower(b"".join(batches), leader_high_watermark=2, leader_log_start_offset=0)
    assert (follower.log_end_offset, follower.high_watermark) == (3, 2)
    follower.append_records_as_follower(b"", leader_high_watermark=9, leader_log_start_offset=1)
    assert (follower.high_watermark, follower.log.log_start_offset) == (3, 1)
    follower.truncate_to(2)
    assert (follower.log_end_offset, follower.high_watermark) == (2, 2)
    follower.truncate_fully_and_start_at(40)
    assert (follower.log_end_offset, follower.high_watermark) == (40, 40)
    follower.log.close()


def test_follower_fetches_are_believed_only_from_replicas_at_offsets_the_leader_has(leader):
    for stranger in (7, 1):  # not a replica; the leader itself
        with pytest.raises(NotLeaderOrFollower):
            leader.check_follower_fetch(stranger, 0)
    with pytest.raises(OffsetOutOfRange):
        leader.check_follower_fetch(2, leader.log_end_offset + 1)
    leader.check_follower_fetch(2, leader.log_end_offset)


def test_an_idle_in_sync_followers_fetch_is_recorded_in_one_step(leader):
    leader.update_follower_fetch(2, 10, now=1_000)
    assert leader.high_watermark == 10
    assert leader.record_caught_up_fetch(2, 10, -1, now=5_000)  # at our LEO, which it had: caught up now
    remote = leader.remote[2]
    assert (remote.last_caught_up_ms, remote.last_fetch_ms, remote.last_fetch_leader_leo) == (5_000, 5_000, 10)
    assert leader.out_of_sync_replicas(1_000, now=5_500) == []


def test_any_other_fetch_is_left_to_the_full_update(leader):
    leader.update_follower_fetch(2, 4, now=1_000)
    before = vars(leader.remote[2]).copy()
    assert not leader.record_caught_up_fetch(2, 10, -1, now=5_000)  # its LEO moved: the HW may move
    assert not leader.record_caught_up_fetch(2, 4, -1, now=5_000)  # behind our LEO
    leader.update_follower_fetch(2, 10, now=1_000)
    before = vars(leader.remote[2]).copy()
    assert not leader.record_caught_up_fetch(2, 10, 3, now=5_000)  # its log start moved
    leader.update_follower_fetch(3, 10, now=1_000)
    assert not leader.record_caught_up_fetch(3, 10, -1, now=5_000)  # not in the ISR: it may join
    assert leader.should_expand_isr(3)
    assert vars(leader.remote[2]) == before  # nothing recorded by a refusal
    assert not leader.record_caught_up_fetch(4, 10, -1, now=5_000)  # not a replica
