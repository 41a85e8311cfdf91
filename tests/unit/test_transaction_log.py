"""Transactions in the log (KIP-98): producer state tracks open transactions, markers close them,
the LSO, the aborted-transaction index (`.txnindex`, Kafka's format) and what survives truncation,
crash recovery, snapshots and the cleaner's swap."""

import os
import struct

import pytest
from storage_helpers import read_all

from protocol import record_batch as rb
from protocol.control_records import marker_batch, read_marker
from storage.append_origin import AppendOrigin
from storage.config import LogConfig
from storage.log import Log
from storage.log_loader import load_log
from storage.producer_state import InvalidProducerEpoch, TransactionCoordinatorFenced
from storage.transaction_index import ENTRY_SIZE, AbortedTxn


def txn_batch(pid: int, seq: int, *values: bytes, epoch: int = 0) -> bytes:
    return rb.build_batch(
        [(b"k", v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )


def plain(*values: bytes) -> bytes:
    return rb.build_batch([(b"p", v) for v in values])


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return marker_batch(pid, epoch, coordinator_epoch, commit)


def new_log(tmp_path, **config) -> Log:
    return Log.create(tmp_path / "t-0", LogConfig(**config))


def test_marker_round_trip():
    data = marker(5, True, epoch=3, coordinator_epoch=9)
    header = rb.read_header(data)
    assert header.is_control and header.is_transactional and header.producer_id == 5
    assert read_marker(data, 0, header) == (True, 9)


def test_lso_follows_the_oldest_open_transaction(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(plain(b"a"), 0)  # 0
    log.append_as_leader(txn_batch(1, 0, b"t1"), 0)  # 1: producer 1 opens
    log.append_as_leader(txn_batch(2, 0, b"t2"), 0)  # 2: producer 2 opens
    log.append_as_leader(plain(b"b"), 0)  # 3
    assert log.last_stable_offset(high_watermark=4) == 1
    assert log.last_stable_offset(high_watermark=0) == 0  # never above the HW
    log.append_as_leader(marker(1, commit=True), 0, origin=AppendOrigin.COORDINATOR)  # 4
    # the marker is not replicated yet (HW 4): producer 1's transaction still holds the LSO
    assert log.last_stable_offset(high_watermark=4) == 1
    assert log.last_stable_offset(high_watermark=5) == 2
    log.append_as_leader(marker(2, commit=False), 0, origin=AppendOrigin.COORDINATOR)  # 5
    assert log.last_stable_offset(high_watermark=6) == 6
    assert log.collect_aborted_txns(0, 6) == [AbortedTxn(2, 2, 5, 6)]
    assert log.collect_aborted_txns(3, 6) == [AbortedTxn(2, 2, 5, 6)]  # still open at offset 3
    assert log.collect_aborted_txns(0, 2) == []  # nothing of it below offset 2
    assert log.collect_aborted_txns(6, 7) == []


def test_txnindex_file_is_kafkas_format(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(7, 0, b"x", b"y"), 0)  # 0-1
    log.append_as_leader(marker(7, commit=False), 0, origin=AppendOrigin.COORDINATOR)  # 2
    data = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    assert len(data) == ENTRY_SIZE
    assert struct.unpack(">hqqqq", data) == (0, 7, 0, 2, 3)


def test_markers_are_fenced_by_producer_and_coordinator_epoch(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(1, 0, b"x", epoch=3), 0)
    log.append_as_leader(marker(1, commit=True, epoch=3, coordinator_epoch=5), 0, origin=AppendOrigin.COORDINATOR)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(marker(1, commit=False, epoch=2, coordinator_epoch=5), 0, origin=AppendOrigin.COORDINATOR)
    with pytest.raises(TransactionCoordinatorFenced):
        log.append_as_leader(marker(1, commit=False, epoch=3, coordinator_epoch=4), 0, origin=AppendOrigin.COORDINATOR)
    with pytest.raises(Exception, match="control"):
        log.append_as_leader(marker(1, commit=True, epoch=3, coordinator_epoch=5), 0)  # not from a client
    assert log.log_end_offset == 2


def test_followers_build_the_same_state(tmp_path):
    leader = new_log(tmp_path / "leader")
    leader.append_as_leader(txn_batch(1, 0, b"a"), 0)
    leader.append_as_leader(txn_batch(2, 0, b"b"), 0)
    leader.append_as_leader(marker(1, commit=False), 0, origin=AppendOrigin.COORDINATOR)
    follower = new_log(tmp_path / "follower")
    for segment in leader.segments:
        follower.append_as_follower(segment.pread(segment.size, 0))
    assert follower.collect_aborted_txns(0, 10) == leader.collect_aborted_txns(0, 10) == [AbortedTxn(1, 0, 2, 1)]
    assert follower.last_stable_offset(10) == leader.last_stable_offset(10) == 1


def test_truncation_reopens_a_transaction_whose_marker_it_removed(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(txn_batch(1, 0, b"a"), 0)  # 0
    log.append_as_leader(marker(1, commit=False), 0, origin=AppendOrigin.COORDINATOR)  # 1
    log.append_as_leader(plain(b"b"), 0)  # 2
    assert log.last_stable_offset(3) == 3
    log.truncate_to(1)
    assert log.collect_aborted_txns(0, 10) == []
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()
    assert log.last_stable_offset(1) == 0  # open again: the LSO is its first offset (below the HW 1)
    log.append_as_leader(marker(1, commit=True), 0, origin=AppendOrigin.COORDINATOR)
    assert log.last_stable_offset(2) == 2


@pytest.mark.parametrize("clean", [True, False])
def test_restart_keeps_open_transactions_and_the_index(tmp_path, clean):
    config = LogConfig(segment_bytes=300)
    log = Log.create(tmp_path / "t-0", config)
    for i in range(6):
        log.append_as_leader(plain(b"p" * 40), 0)
        log.append_as_leader(txn_batch(i, 0, b"t" * 40), 0)
        if i % 2:
            log.append_as_leader(marker(i, commit=i % 4 == 1), 0, origin=AppendOrigin.COORDINATOR)
    assert len(log.segments) > 2
    expected_aborted = log.collect_aborted_txns(0, log.log_end_offset)
    expected_lso = log.last_stable_offset(log.log_end_offset)
    assert [t.producer_id for t in expected_aborted] == [3]
    if clean:
        log.close()
    else:
        for segment in log.segments:
            os.close(segment._fd)
            segment._fd = -1
    again = load_log(tmp_path / "t-0", config, clean_shutdown=clean, recovery_point=0)
    assert again.collect_aborted_txns(0, again.log_end_offset) == expected_aborted
    assert again.last_stable_offset(again.log_end_offset) == expected_lso == 1  # producer 0 never ended


def test_a_damaged_txnindex_is_rebuilt(tmp_path):
    config = LogConfig(segment_bytes=300)
    log = Log.create(tmp_path / "t-0", config)
    log.append_as_leader(txn_batch(4, 0, b"t" * 100), 0)
    log.append_as_leader(marker(4, commit=False), 0, origin=AppendOrigin.COORDINATOR)
    for _ in range(4):
        log.append_as_leader(plain(b"p" * 100), 0)
    log.close()
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    index.write_bytes(index.read_bytes()[:-3])
    again = load_log(tmp_path / "t-0", config, clean_shutdown=True)
    assert again.collect_aborted_txns(0, again.log_end_offset) == [AbortedTxn(4, 0, 1, 2)]
    assert [v for _, v in read_all(again)][0] == b"t" * 100


def test_cleaner_swap_carries_the_aborted_transactions(tmp_path):
    config = LogConfig(segment_bytes=250, cleanup_policy="compact")
    log = Log.create(tmp_path / "t-0", config)
    log.append_as_leader(txn_batch(4, 0, b"t" * 100), 0)
    log.append_as_leader(marker(4, commit=False), 0, origin=AppendOrigin.COORDINATOR)
    for _ in range(4):
        log.append_as_leader(plain(b"p" * 100), 0)
    first = log.segments[0]
    # a "cleaned" copy of the first segment, as the cleaner would write it
    cleaned = tmp_path / "t-0" / "00000000000000000000.log.cleaned"
    cleaned.write_bytes(first.pread(first.size, 0))
    log.replace_segments(0, [0])
    assert log.collect_aborted_txns(0, log.log_end_offset) == [AbortedTxn(4, 0, 1, 2)]
    assert (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()
