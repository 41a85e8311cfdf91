"""Replica assignment and leader selection: pure functions, table-tested."""

import collections

import pytest

from controller import election
from controller.assignment import InvalidReplicationFactor, assign_replicas
from controller.context import ControllerContext
from controller.partition_state_machine import NEW, NON_EXISTENT, OFFLINE, ONLINE, IllegalStateChange, set_state


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


# ---- partition states (Kafka PartitionStateMachine's valid previous states) -----------------------

STATES = [NON_EXISTENT, NEW, ONLINE, OFFLINE]
ALLOWED = {
    (NON_EXISTENT, NEW),
    (NEW, ONLINE),
    (NEW, OFFLINE),
    (ONLINE, ONLINE),
    (ONLINE, OFFLINE),
    (OFFLINE, ONLINE),
    (OFFLINE, OFFLINE),
    (OFFLINE, NON_EXISTENT),
}


@pytest.mark.parametrize("current,target", [(a, b) for a in STATES for b in STATES])
def test_partition_state_transitions_follow_the_table(current, target):
    ctx = ControllerContext()
    if current != NON_EXISTENT:
        ctx.partition_states[("t", 0)] = current
    if (current, target) in ALLOWED:
        set_state(ctx, ("t", 0), target)
        assert ctx.partition_states.get(("t", 0), NON_EXISTENT) == target
    else:
        with pytest.raises(IllegalStateChange):
            set_state(ctx, ("t", 0), target)
        assert ctx.partition_states.get(("t", 0), NON_EXISTENT) == current  # unchanged


# ---- controller events -----------------------------------------------------------------------------
def test_every_controller_event_type_has_a_handler_and_unknown_ones_are_refused():
    import dataclasses

    from controller import events as ev
    from controller.config import ControllerConfig
    from controller.controller import KafkaController, UnknownControllerEvent
    from storage.topic_configs import TopicConfigs

    controller = KafkaController(ControllerConfig(broker_id=1), zk=None, topic_configs=TopicConfigs())
    declared = {
        c
        for c in vars(ev).values()
        if isinstance(c, type) and issubclass(c, ev.ControllerEvent) and c is not ev.ControllerEvent
    }
    assert declared == set(controller._handlers)

    @dataclasses.dataclass(frozen=True)
    class Stray(ev.ControllerEvent):
        pass

    with pytest.raises(UnknownControllerEvent):
        controller.post(Stray())
    controller.post(ev.Reelect())  # a known one is queued
