"""A share-partition's in-flight records (KIP-932) as pure state: acquisition, the three
acknowledgement types and gaps, lock expiry, the delivery count limit, a member's release, the
record-lock cap and control batches."""

import pytest

from broker.share.share_partition import ACCEPT, GAP, REJECT, RELEASE, Batch, RecordState, SharePartition
from protocol.errors import ErrorCode as E


def partition(start=0, *, limit=3, locks=100):
    return SharePartition(start, lock_duration_ms=30_000, delivery_limit=limit, max_in_flight=locks)


def log(*ranges, control=()):
    return [Batch(a, b, (a, b) in control) for a, b in ranges]


def test_records_are_acquired_once_and_accepted_records_move_the_start_offset():
    sp = partition()
    assert sp.acquire("a", log((0, 4), (5, 9)), 6, now_ms=0) == [(0, 9, 1)]  # MaxRecords is soft: whole batches
    assert sp.end_offset == 10 and sp.next_fetch_offset() == 10
    assert sp.acquire("b", log((0, 4), (5, 9)), 10, now_ms=0) == []  # a holds them all
    assert sp.acknowledge("a", 0, 2, [ACCEPT]) == E.NONE
    assert sp.start_offset == 3
    assert sp.acknowledge("b", 3, 3, [ACCEPT]) == E.INVALID_RECORD_STATE  # a's record, not b's
    assert sp.acknowledge("a", 3, 5, [ACCEPT, REJECT, GAP]) == E.NONE
    assert sp.start_offset == 6 and sp.records().keys() == set(range(6, 10))


def test_a_released_record_is_delivered_again_with_its_count_and_archived_at_the_limit():
    sp = partition(limit=2)
    assert sp.acquire("a", log((0, 1)), 10, now_ms=0) == [(0, 1, 1)]
    assert sp.acknowledge("a", 0, 1, [RELEASE]) == E.NONE
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", log((0, 1)), 10, now_ms=0) == [(0, 1, 2)]  # to another member, count 2
    assert sp.acknowledge("b", 0, 0, [RELEASE]) == E.NONE  # at the limit: archived
    assert 0 not in sp.records() and sp.start_offset == 1  # archived, then forgotten past the SPSO
    assert sp.acknowledge("b", 1, 1, [ACCEPT]) == E.NONE and sp.start_offset == 2


def test_a_lock_that_runs_out_makes_the_records_available_again():
    sp = partition(limit=2)
    sp.acquire("a", log((0, 2)), 10, now_ms=0)
    assert sp.expire_locks(now_ms=29_999) == 0
    assert sp.expire_locks(now_ms=30_000) == 3
    assert sp.acquire("b", log((0, 2)), 10, now_ms=30_000) == [(0, 2, 2)]
    assert sp.acknowledge("a", 0, 0, [ACCEPT]) == E.INVALID_RECORD_STATE  # a's lock is gone
    sp.expire_locks(now_ms=60_000)  # the second delivery ran out too: archived
    assert sp.start_offset == 3 and not sp.records()


def test_a_member_that_leaves_releases_what_it_holds():
    sp = partition()
    sp.acquire("a", log((0, 1), (2, 3)), 2, now_ms=0)
    sp.acquire("b", log((0, 1), (2, 3)), 2, now_ms=0)
    assert sp.release_member("a") == 2
    assert sp.acquire("c", log((0, 1), (2, 3)), 10, now_ms=0) == [(0, 1, 2)]


def test_the_record_lock_cap_and_max_records_bound_acquisition():
    sp = partition(locks=3)
    assert sp.acquire("a", log((0, 9)), 10, now_ms=0) == [(0, 2, 1)]
    assert sp.acquire("b", log((0, 9)), 10, now_ms=0) == []  # the cap is reached
    sp.acknowledge("a", 0, 0, [ACCEPT])
    assert sp.acquire("b", log((0, 9)), 10, now_ms=0) == [(3, 3, 1)]


def test_control_batches_are_archived_never_delivered():
    sp = partition()
    acquired = sp.acquire("a", log((0, 1), (2, 2), (3, 4), control=[(2, 2)]), 10, now_ms=0)
    assert acquired == [(0, 1, 1), (3, 4, 1)]
    sp.acknowledge("a", 0, 1, [ACCEPT])
    assert sp.start_offset == 3  # past the marker


@pytest.mark.parametrize("first, last, types", [(3, 2, [ACCEPT]), (0, 2, [ACCEPT, ACCEPT]), (0, 0, [9])])
def test_malformed_acknowledgements_are_invalid_requests(first, last, types):
    sp = partition()
    sp.acquire("a", log((0, 4)), 10, now_ms=0)
    assert sp.acknowledge("a", first, last, types) == E.INVALID_REQUEST
    assert all(r.state == RecordState.ACQUIRED for r in sp.records().values())


def test_an_acknowledgement_of_a_huge_range_is_refused_without_walking_it():
    sp = partition()
    sp.acquire("a", log((0, 4)), 10, now_ms=0)
    assert sp.acknowledge("a", 0, (1 << 62), [ACCEPT]) == E.INVALID_RECORD_STATE


def test_the_persisted_state_restores_at_the_next_leader_with_acquired_records_available():
    sp = SharePartition(0, lock_duration_ms=1000, delivery_limit=3, max_in_flight=100)
    sp.acquire("a", [Batch(0, 9, False)], 100, now_ms=0)
    assert sp.acknowledge("a", 0, 1, [ACCEPT]) == E.NONE  # the SPSO moves to 2
    assert sp.acknowledge("a", 4, 4, [REJECT]) == E.NONE
    assert sp.acknowledge("a", 5, 5, [RELEASE]) == E.NONE
    start, batches, done = sp.persisted()
    assert start == 2 and done == 1
    assert batches == [(2, 3, 0, 1), (4, 4, 4, 1), (5, 9, 0, 1)]  # acquired 2-3, 6-9 written Available
    again = SharePartition(start, lock_duration_ms=1000, delivery_limit=3, max_in_flight=100)
    again.restore(batches, log_end_offset=8)  # 8 and 9 are not in this leader's log
    assert again.end_offset == 8 and again.next_fetch_offset() == 2
    got = again.acquire("b", [Batch(0, 7, False)], 100, now_ms=0)
    assert [tuple(r) for r in got] == [(2, 3, 2), (5, 7, 2)]  # 4 stays archived; counts kept, +1


def test_a_pending_acknowledgement_holds_its_records_until_committed_or_rolled_back():
    sp = partition()
    sp.acquire("a", log((0, 3)), 10, now_ms=0)
    written = object()
    assert sp.acknowledge("a", 0, 1, [RELEASE], written) == E.NONE
    assert sp.acknowledge("a", 2, 3, [ACCEPT], written) == E.NONE
    assert sp.acquire("b", log((0, 3)), 10, now_ms=0) == []  # a release not durable: not handed out
    assert sp.start_offset == 0  # nor does the SPSO pass an accept that is not durable
    assert sp.persisted() == (0, [(0, 3, 0, 1)], 0)  # other writes carry them as they were
    assert sp.persisted(include=written) == (0, [(0, 1, 0, 1), (2, 3, 2, 1)], 2)
    sp.commit(written)
    assert sp.start_offset == 0 and sp.acquire("b", log((0, 3)), 10, now_ms=0) == [(0, 1, 2)]


def test_a_failed_write_rolls_the_acknowledgements_back_to_their_member_and_lock():
    sp = partition()
    sp.acquire("a", log((0, 3)), 10, now_ms=0)
    failed = object()
    assert sp.acknowledge("a", 0, 3, [ACCEPT], failed) == E.NONE
    assert sp.acknowledge("a", 0, 0, [ACCEPT]) == E.INVALID_RECORD_STATE  # pending: not a's to acknowledge
    sp.rollback(failed)
    assert sp.dirty and sp.acquired_count == 4 and sp.start_offset == 0
    assert all(r.state == RecordState.ACQUIRED and r.member_id == "a" for r in sp.records().values())
    assert sp.expire_locks(now_ms=29_999) == 0 and sp.expire_locks(now_ms=30_000) == 4  # the lock it had
    assert sp.acquire("b", log((0, 3)), 10, now_ms=30_000) == [(0, 3, 2)]
