"""Replica assignment and leader selection: pure functions, table-tested."""

import collections

import pytest

from controller import election
from controller.assignment import InvalidReplicationFactor, assign_replicas


def test_rack_unaware_assignment_matches_kafkas_algorithm():
    # Kafka's AdminUtils with fixedStartIndex=0 over brokers 0..4, 10 partitions, RF 3 (its unit test).
    got = assign_replicas(10, 3, [0, 1, 2, 3, 4], fixed_start_index=0)
    assert got == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


@pytest.mark.parametrize("seed", range(5))
def test_leaders_and_replicas_spread_evenly(seed):
    import random

    got = assign_replicas(6, 3, [1, 2, 3], rng=random.Random(seed))
    assert collections.Counter(r[0] for r in got.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(r) == [1, 2, 3] for r in got.values())


def test_invalid_assignments():
    with pytest.raises(InvalidReplicationFactor):
        assign_replicas(3, 4, [1, 2, 3])
    with pytest.raises(ValueError):
        assign_replicas(0, 1, [1])


@pytest.mark.parametrize(
    "assignment,isr,live,unclean,expected",
    [
        ([1, 2, 3], [1, 2, 3], {2, 3}, False, (2, [2, 3])),
        ([1, 2, 3], [3, 1], {2, 3}, False, (3, [3])),
        ([1, 2, 3], [1], {2, 3}, False, None),
        ([1, 2, 3], [1], {2, 3}, True, (2, [2])),  # unclean: data only 1 had is lost
        ([1, 2, 3], [1], set(), True, None),
    ],
)
def test_offline_partition_leader(assignment, isr, live, unclean, expected):
    assert election.offline_partition_leader(assignment, isr, live, unclean) == expected


def test_preferred_and_controlled_shutdown_leaders():
    assert election.preferred_replica_leader([2, 1], [1, 2], {1, 2}) == (2, [1, 2])
    assert election.preferred_replica_leader([2, 1], [1], {1, 2}) is None
    assert election.controlled_shutdown_leader([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, [2, 3])
    assert election.controlled_shutdown_leader([1, 2], [1], {1, 2}, {1}) is None
