"""Idempotent-producer state: the pure rules, table-tested, and the log-level dedup across restarts."""

import pytest
from storage_helpers import read_all

from protocol import record_batch as rb
from storage.config import LogConfig
from storage.log import Log
from storage.log_loader import load_log
from storage.producer_state import SEQUENCE_LIMIT, InvalidProducerEpoch, OutOfOrderSequence, ProducerStateManager


def state_with(pid=7, epoch=0, batches=((0, 4, 0, 4),)):
    s = ProducerStateManager()
    for first_seq, last_seq, first_off, last_off in batches:
        s.update(pid, epoch, first_seq, last_seq, first_off, last_off, 1000)
    return s


@pytest.mark.parametrize(
    "epoch,first_seq,error",
    [
        (0, 5, None),  # the next sequence
        (0, 6, OutOfOrderSequence),  # a gap
        (0, 3, OutOfOrderSequence),  # going back (not a cached batch)
        (1, 0, None),  # a bumped epoch restarts at 0 (KIP-360)
        (1, 5, OutOfOrderSequence),  # a bumped epoch must restart at 0
    ],
)
def test_sequence_and_epoch_rules(epoch, first_seq, error):
    s = state_with()
    if error:
        with pytest.raises(error):
            s.check(7, epoch, first_seq)
    else:
        s.check(7, epoch, first_seq)


def test_an_older_epoch_is_fenced_and_unknown_producers_start_anywhere():
    s = state_with(epoch=3)
    with pytest.raises(InvalidProducerEpoch):
        s.check(7, 2, 5)
    s.check(99, 0, 1234)  # no state for this producer (expired or never seen): accepted


def test_duplicates_of_the_last_five_batches():
    s = state_with(batches=[(i * 5, i * 5 + 4, i * 5, i * 5 + 4) for i in range(7)])
    assert s.find_duplicate(7, 0, 30, 34).first_offset == 30
    assert s.find_duplicate(7, 0, 10, 14).first_offset == 10  # still among the last 5
    assert s.find_duplicate(7, 0, 5, 9) is None  # aged out
    assert s.find_duplicate(7, 1, 30, 34) is None  # another epoch


def test_sequence_wraps_around():
    s = state_with(batches=[(SEQUENCE_LIMIT - 3, SEQUENCE_LIMIT - 1, 0, 2)])
    s.check(7, 0, 0)
    with pytest.raises(OutOfOrderSequence):
        s.check(7, 0, 1)


def test_pending_batches_of_one_request_chain():
    s = state_with()
    s.check(7, 0, 5, pending={})
    s.check(7, 0, 10, pending={7: (0, 9)})
    with pytest.raises(OutOfOrderSequence):
        s.check(7, 0, 11, pending={7: (0, 9)})


def test_expiry_spares_producers_with_an_open_transaction():
    s = state_with(batches=[(0, 4, 0, 4), (5, 9, 5, 9)])
    s.update(8, 0, 0, 0, 10, 10, 5000)
    assert s.remove_expired(now_ms=1000 + s.expiration_ms + 1) == [7]
    header = rb.read_header(
        rb.build_batch(
            [(None, b"t")], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True, timestamp_ms=1000
        )
    )
    s.update_from_header(header)
    assert s.remove_expired(now_ms=1000 + s.expiration_ms + 1) == []  # its transaction holds it
    assert s.ongoing == {9: 0}


def idempotent_batch(pid, epoch, seq, *values):
    return rb.build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_log_answers_a_retry_with_the_original_offsets(tmp_path):
    log = Log.create(tmp_path / "t-0", LogConfig())
    first = log.append_as_leader(idempotent_batch(5, 0, 0, b"a", b"b"), leader_epoch=0)
    log.append_as_leader(idempotent_batch(5, 0, 2, b"c"), leader_epoch=0)
    retry = log.append_as_leader(idempotent_batch(5, 0, 0, b"a", b"b"), leader_epoch=0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset) == (0, 1)
    assert [v for _, v in read_all(log)] == [b"a", b"b", b"c"]
    with pytest.raises(OutOfOrderSequence):
        log.append_as_leader(idempotent_batch(5, 0, 9, b"gap"), leader_epoch=0)
    assert log.log_end_offset == 3


@pytest.mark.parametrize("clean", [True, False])
def test_dedup_survives_restarts(tmp_path, clean):
    log = Log.create(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for seq in range(0, 30, 3):
        log.append_as_leader(idempotent_batch(5, 0, seq, b"x" * 40, b"y", b"z"), leader_epoch=0)
    assert len(log.segments) > 2
    if clean:
        log.close()
    else:  # no close: no snapshot of the last state, no trimmed indexes
        for segment in log.segments:
            import os

            os.close(segment._fd)
            segment._fd = None
    again = load_log(tmp_path / "t-0", LogConfig(segment_bytes=400), clean_shutdown=clean, recovery_point=0)
    retry = again.append_as_leader(idempotent_batch(5, 0, 27, b"x" * 40, b"y", b"z"), leader_epoch=0)
    assert (retry.first_offset, again.log_end_offset) == (27, 30)
    again.append_as_leader(idempotent_batch(5, 0, 30, b"next"), leader_epoch=0)
    with pytest.raises(OutOfOrderSequence):
        again.append_as_leader(idempotent_batch(5, 0, 40, b"gap"), leader_epoch=0)
    assert list(tmp_path.glob("t-0/*.snapshot"))


def test_truncation_forgets_producer_state_above_it(tmp_path):
    log = Log.create(tmp_path / "t-0", LogConfig())
    log.append_as_leader(idempotent_batch(5, 0, 0, b"a"), leader_epoch=0)
    log.append_as_leader(idempotent_batch(5, 0, 1, b"b"), leader_epoch=0)
    log.truncate_to(1)
    # the batch with sequence 1 is gone: it may be sent again as new, not as a duplicate
    info = log.append_as_leader(idempotent_batch(5, 0, 1, b"b"), leader_epoch=1)
    assert info.first_offset == 1 and log.log_end_offset == 2
