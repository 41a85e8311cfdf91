"""KIP-101's scenarios, where truncating a follower to its high watermark loses acknowledged data or
lets replicas diverge, replayed on real logs with leader-epoch truncation. The follower truncates as
`broker/truncation.py` says, then fetches the leader's batches from there; afterwards both logs
hold the same bytes and no acknowledged record is gone."""

from storage_helpers import read_all

from broker.truncation import truncation_offset
from protocol import record_batch as rb
from storage.config import LogConfig
from storage.log import Log


def replica(tmp_path, name):
    return Log.create(tmp_path / f"{name}-0", LogConfig())


def lead(log, epoch, *values):
    """Append as leader in `epoch` (stamping its start offset as a new leader does)."""
    if epoch > log.epoch_cache.latest_epoch:
        log.epoch_cache.assign(epoch, log.log_end_offset)
    for v in values:
        log.append_as_leader(rb.build_batch([(None, v)]), leader_epoch=epoch)


def follow(follower, leader, follower_hw):
    """Truncate by leader epoch, then copy the leader's batches from the follower's LEO."""
    leader_epoch, end = leader.epoch_cache.end_offset_for(follower.epoch_cache.latest_epoch, leader.log_end_offset)
    offset = truncation_offset(follower.epoch_cache, follower.log_end_offset, follower_hw, leader_epoch, end)
    follower.truncate_to(offset)
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).records)
    return offset


def same_bytes(a, b):
    return a.read(a.log_start_offset, 1 << 30).records == b.read(b.log_start_offset, 1 << 30).records


def test_scenario_1_hw_truncation_would_lose_an_acknowledged_record(tmp_path):
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    lead(a, 0, b"m1", b"m2")
    follow(b, a, follower_hw=0)  # b has m1, m2; the leader's HW is 2 (m2 acknowledged)...
    b_hw = 1  # ...but b learned HW 1 only, then restarts
    kept = follow(b, a, follower_hw=b_hw)
    assert kept == 2  # HW-based truncation would have cut m2 (offset 1)
    # a dies; b leads epoch 1: the acknowledged m2 is still there
    lead(b, 1, b"m3")
    assert [v for _, v in read_all(b)] == [b"m1", b"m2", b"m3"]


def test_scenario_2_replicas_would_diverge(tmp_path):
    a, b = replica(tmp_path, "a"), replica(tmp_path, "b")
    lead(a, 0, b"m1")
    follow(b, a, follower_hw=1)
    lead(a, 0, b"m2")  # the ISR had shrunk to {a}: a's HW reached 2, b never got m2
    # both crash; b comes back first and leads epoch 1, writing m3 at offset 1
    lead(b, 1, b"m3")
    # a returns as follower: truncating to its HW (2) would keep m2 at offset 1 beside b's m3
    offset = follow(a, b, follower_hw=2)
    assert offset == 1
    assert same_bytes(a, b) and [v for _, v in read_all(a)] == [b"m1", b"m3"]


def test_two_successive_leader_changes(tmp_path):
    """KIP-279: the follower's latest epoch is unknown to the leader."""
    a, b, c = replica(tmp_path, "a"), replica(tmp_path, "b"), replica(tmp_path, "c")
    lead(a, 0, b"x0", b"x1", b"x2", b"x3")
    follow(b, a, 4)
    follow(c, a, 4)
    lead(b, 1, b"b4", b"b5")  # b led epoch 1 briefly; nobody copied it
    lead(c, 2, b"c4", b"c5", b"c6")  # then c led epoch 2
    offset = follow(b, c, follower_hw=4)  # b asks for epoch 1; c knows only 0 and 2
    assert offset == 4
    assert same_bytes(b, c) and [v for _, v in read_all(b)] == [b"x0", b"x1", b"x2", b"x3", b"c4", b"c5", b"c6"]
    assert b.epoch_cache.entries == c.epoch_cache.entries == [(0, 0), (2, 4)]


def test_truncation_table():
    from storage.epoch_cache import LeaderEpochCache

    cache = LeaderEpochCache(None, [(0, 0), (2, 10)])
    assert truncation_offset(cache, 15, 12, 2, 20) == 15  # same epoch, leader ahead: keep all
    assert truncation_offset(cache, 15, 12, 2, 13) == 13  # leader's epoch 2 ended earlier
    assert truncation_offset(cache, 15, 12, 1, 11) == 10  # leader knows epoch 1 (we do not): our 0 ends at 10
    assert truncation_offset(cache, 15, 12, -1, -1) == 12  # no epoch information: the HW
    assert truncation_offset(LeaderEpochCache(None, []), 5, 3, 0, 4) == 4
