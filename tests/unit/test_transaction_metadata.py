"""The transaction coordinator's pure core (issue 19 groundwork): Kafka's state table, the
prepare / complete two-step, epoch bumps and fencing, and the `__transaction_state` records."""

import itertools

import pytest

from coordinator.record_codec import CorruptCoordinatorRecord
from coordinator.transaction import records
from coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    SHORT_MAX,
    VALID_PREVIOUS,
    IllegalTxnTransition,
    ProducerFenced,
    TransactionMetadata,
    TxnState,
)

S = TxnState


def step(metadata, transition):
    metadata.complete_transition(transition)
    return metadata


def test_a_commit_and_an_abort_walk_the_states():
    m = TransactionMetadata("app", producer_id=7)
    step(m, m.prepare_increment_epoch(30000, now_ms=1))
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.EMPTY, 0, NO_PRODUCER_EPOCH)
    step(m, m.prepare_add_partitions({("t", 0)}, now_ms=10))
    step(m, m.prepare_add_partitions({("t", 1)}, now_ms=20))
    assert m.state == S.ONGOING and m.partitions == {("t", 0), ("t", 1)} and m.txn_start_timestamp_ms == 10
    step(m, m.prepare_end(commit=True, now_ms=30))
    assert m.state == S.PREPARE_COMMIT and m.partitions == {("t", 0), ("t", 1)}
    step(m, m.prepare_complete(now_ms=40))
    assert m.state == S.COMPLETE_COMMIT and m.partitions == set()
    step(m, m.prepare_add_partitions({("u", 3)}, now_ms=50))  # a new transaction starts its clock
    assert m.txn_start_timestamp_ms == 50 and m.partitions == {("u", 3)}
    step(m, m.prepare_end(commit=False, now_ms=60))
    step(m, m.prepare_complete(now_ms=70))
    assert m.state == S.COMPLETE_ABORT


def test_every_transition_outside_the_table_is_refused_and_changes_nothing():
    prepare = {
        S.EMPTY: lambda m: m.prepare_increment_epoch(1000, 0),
        S.ONGOING: lambda m: m.prepare_add_partitions({("t", 0)}, 0),
        S.PREPARE_COMMIT: lambda m: m.prepare_end(True, 0),
        S.PREPARE_ABORT: lambda m: m.prepare_end(False, 0),
        S.PREPARE_EPOCH_FENCE: lambda m: m.prepare_fence_epoch(),
        S.DEAD: lambda m: m.prepare_dead(),
    }
    for current, target in itertools.product(S, prepare):
        m = TransactionMetadata("x", 1, producer_epoch=3, state=current, partitions={("t", 0)})
        if current in VALID_PREVIOUS[target]:
            assert prepare[target](m).state == target and m.pending == target
        else:
            with pytest.raises(IllegalTxnTransition):
                prepare[target](m)
            assert m.state == current and m.pending is None


def test_one_transition_at_a_time_and_a_failed_write_changes_nothing():
    m = TransactionMetadata("x", 1, producer_epoch=0)
    t = m.prepare_add_partitions({("t", 0)}, 5)
    with pytest.raises(IllegalTxnTransition, match="pending"):
        m.prepare_add_partitions({("t", 1)}, 6)
    m.abort_transition()
    assert m.state == S.EMPTY and m.partitions == set() and m.pending is None
    with pytest.raises(IllegalTxnTransition):
        m.complete_transition(t)  # no longer pending


def test_epoch_bumps_fencing_and_retries():
    m = TransactionMetadata("x", 1, producer_epoch=4)
    step(m, m.prepare_increment_epoch(1000, 0, expected=(1, 4)))
    assert (m.producer_epoch, m.last_producer_epoch) == (5, 4)
    # the same request retried (its answer lost): the same epoch, not another bump
    step(m, m.prepare_increment_epoch(1000, 0, expected=(1, 4)))
    assert (m.producer_epoch, m.last_producer_epoch) == (5, 4)
    with pytest.raises(ProducerFenced):
        m.prepare_increment_epoch(1000, 0, expected=(1, 2))
    assert m.pending is None
    # an ongoing transaction of a zombie: fence with a bumped epoch, then abort with it
    step(m, m.prepare_add_partitions({("t", 0)}, 1))
    step(m, m.prepare_fence_epoch())
    assert m.state == S.PREPARE_EPOCH_FENCE and m.producer_epoch == 6
    step(m, m.prepare_end(commit=False, now_ms=2))
    step(m, m.prepare_complete(3))
    assert m.state == S.COMPLETE_ABORT and m.producer_epoch == 6
    exhausted = TransactionMetadata("y", 1, producer_epoch=SHORT_MAX - 1)
    assert exhausted.epoch_exhausted
    with pytest.raises(IllegalTxnTransition):
        exhausted.prepare_increment_epoch(1000, 0)
    step(exhausted, exhausted.prepare_rotate_producer_id(99, 1000, 0))
    assert (exhausted.producer_id, exhausted.producer_epoch, exhausted.last_producer_id) == (99, 0, 1)


def test_records_round_trip_and_load():
    m = TransactionMetadata("app", 42, producer_epoch=3, txn_timeout_ms=60000)
    t = m.prepare_add_partitions({("b", 1), ("a", 0), ("a", 2)}, now_ms=1000)
    value = records.transaction_value(t)
    assert records.decode_transaction_value(value) == t
    loaded = TransactionMetadata.from_record(
        records.decode_transaction_key(records.transaction_key("app")), records.decode_transaction_value(value)
    )
    assert (loaded.transactional_id, loaded.producer_id, loaded.producer_epoch, loaded.state) == (
        "app",
        42,
        3,
        S.ONGOING,
    )
    assert loaded.partitions == {("a", 0), ("a", 2), ("b", 1)} and loaded.txn_start_timestamp_ms == 1000


def test_empty_carries_no_partitions_and_corrupt_records_are_refused():
    m = TransactionMetadata("app", 1, producer_epoch=0)
    t = m.prepare_increment_epoch(1000, 5)
    decoded = records.decode_transaction_value(records.transaction_value(t))
    assert decoded.state == S.EMPTY and decoded.partitions == frozenset()
    bad = t.__class__(**{**t.__dict__, "partitions": frozenset({("t", 0)})})
    with pytest.raises(ValueError):
        records.transaction_value(bad)
    with pytest.raises(CorruptCoordinatorRecord):
        records.decode_transaction_value(b"\x00\x07rest")
    with pytest.raises(CorruptCoordinatorRecord):
        records.decode_transaction_key(b"\x00")
    status = bytearray(records.transaction_value(t))
    status[2 + 8 + 2 + 4] = 9  # an unknown status byte
    with pytest.raises(CorruptCoordinatorRecord, match="status 9"):
        records.decode_transaction_value(bytes(status))


def test_placement_is_javas_hash_like_groups():
    assert records.partition_for("polygenelubricants", 50) == 0
    assert records.partition_for("hello", 50) == 99162322 % 50
