"""KIP-890 part 1's VerificationGuard in the producer state (storage/producer_state.py): a guard
lets a verified first transactional batch in; a marker, the transaction's first batch or expiry
clears it; a producer with a transaction open at its epoch needs none."""

import pytest

from protocol import record_batch as rb
from storage.producer_state import InvalidTxnState, ProducerStateManager


def _header(pid: int, epoch: int, base_offset: int, seq: int = 0, transactional: bool = True):
    batch = rb.build_batch(
        [(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=transactional
    )
    return rb.read_header(batch)._replace(base_offset=base_offset)


def test_a_guard_admits_the_first_batch_and_the_open_transaction_needs_none():
    state = ProducerStateManager()
    guard = state.maybe_start_verification(7)
    assert state.maybe_start_verification(7) is guard  # one guard per producer until cleared
    state.check_verified(7, 0, guard)
    with pytest.raises(InvalidTxnState):
        state.check_verified(7, 0, None)
    state.update_from_header(_header(7, 0, 0))  # the transaction opens: the guard is spent
    assert 7 not in state.verifications
    state.check_verified(7, 0, None)  # open at this epoch: no check
    with pytest.raises(InvalidTxnState):
        state.check_verified(7, 1, None)  # another epoch is not this transaction


def test_a_stale_guard_lets_nothing_in():
    state = ProducerStateManager()
    stale = state.maybe_start_verification(7)
    state.verifications.pop(7)  # what a marker for the producer does (the abort raced the check)
    with pytest.raises(InvalidTxnState):
        state.check_verified(7, 0, stale)


def test_expired_producers_lose_their_guards():
    state = ProducerStateManager(expiration_ms=10)
    state.update(7, 0, 0, 0, 0, 0, timestamp=0)
    state.maybe_start_verification(7)
    assert state.remove_expired(now_ms=100) == [7]
    assert 7 not in state.verifications
