"""The share coordinator (KIP-932's `__share_group_state`): its records, the merge of state
batches, the shard's rules (fencing, snapshots, uninitialized reads) and, over a real replica
manager's log, that a write answered NONE is committed and a new coordinator loading the same
log holds exactly the same states; a failed append answers Kafka's error and changes nothing."""

import contextlib
import uuid

import pytest
import trio
from broker_helpers import component_config, replica_manager
from coordinator_partition import FAILURES, CoordinatorPartition

from broker.coordinator_log import CoordinatorPartitionLog
from coordinator.share import records
from coordinator.share.config import ShareCoordinatorConfig
from coordinator.share.coordinator import ShareCoordinator
from coordinator.share.records import SharePartitionKey, ShareState, ShareUpdate, StateWrite
from coordinator.share.records import StateBatch as B
from coordinator.share.shard import ShareCoordinatorShard
from coordinator.share.state_batches import combine
from protocol.errors import ErrorCode as E

TOPIC = "__share_group_state"
KEY = SharePartitionKey("jobs", uuid.UUID(int=0x1234), 3)
AV, ACK, ARC = 0, 2, 4


def W(state_epoch, leader_epoch, start_offset, delivery_complete_count, batches):
    return StateWrite(state_epoch, leader_epoch, start_offset, delivery_complete_count, tuple(batches))


@pytest.mark.parametrize(
    "current, written, start, expected",
    [
        ([B(0, 9, AV, 1)], [B(3, 5, ACK, 1)], 0, [B(0, 2, AV, 1), B(3, 5, ACK, 1), B(6, 9, AV, 1)]),
        ([B(0, 9, AV, 1)], [B(3, 5, ACK, 1)], 4, [B(4, 5, ACK, 1), B(6, 9, AV, 1)]),
        ([B(0, 4, ACK, 1), B(5, 9, AV, 1)], [B(5, 9, ACK, 1)], 0, [B(0, 9, ACK, 1)]),
        ([B(0, 4, AV, 1)], [B(8, 9, AV, 2)], 0, [B(0, 4, AV, 1), B(8, 9, AV, 2)]),
        ([B(0, 4, AV, 1)], [B(0, 1, AV, 2), B(1, 2, ARC, 3)], 0, [B(0, 0, AV, 2), B(1, 2, ARC, 3), B(3, 4, AV, 1)]),
        ([B(0, 4, AV, 1)], [], 10, []),
    ],
)
def test_combine_overrides_overlaps_prunes_below_the_start_and_merges_neighbours(current, written, start, expected):
    assert combine(current, written, start) == expected


def test_records_round_trip_and_the_coordinator_key():
    state = ShareState(2, 1, 5, 100, 3, 1_700_000_000_000, 1_700_000_000_500, [B(100, 104, AV, 2), B(105, 105, ARC, 5)])
    key, value = records.snapshot_record(KEY, state)
    assert records.decode(key, value) == (KEY, state)
    update = ShareUpdate(2, 6, -1, -1, (B(101, 101, ACK, 2),))
    key, value = records.update_record(KEY, update)
    assert records.decode(key, value) == (KEY, update)
    assert [records.decode(k, v) for k, v in records.tombstones(KEY)] == [(KEY, None), (KEY, None)]
    text = records.coordinator_key(KEY)
    assert text == "jobs:AAAAAAAAAAAAAAAAAAASNA:3"  # Kafka's Uuid.toString is url-safe base64
    assert records.parse_coordinator_key(text) == KEY
    assert records.parse_coordinator_key("a:b:" + text) == KEY._replace(group_id="a:b:jobs")
    with pytest.raises(ValueError):
        records.parse_coordinator_key("jobs:3")


def committed(shard, result):
    """Apply a result as the runtime does once its records are committed; its answer."""
    if result.replay is not None:
        result.replay(0)
    return result.response


def test_the_shard_fences_old_leader_and_state_epochs_and_snapshots_every_n_updates():
    shard = ShareCoordinatorShard(snapshot_every=2, clock_ms=lambda: 1000)
    unread = committed(shard, shard.read_state(KEY, 0))
    assert unread.error_code == E.NONE and unread.start_offset == -1
    first = shard.write_state(KEY, W(0, 1, 10, -1, [B(10, 14, AV, 1)]))
    assert records.decode(*first.records[0])[1].snapshot_epoch == 0  # the first write is a snapshot
    committed(shard, first)
    kinds = []
    for i in range(5):
        result = shard.write_state(KEY, W(0, 1, -1, i, [B(10 + i, 10 + i, ACK, 1)]))
        kinds.append(type(records.decode(*result.records[0])[1]).__name__)
        committed(shard, result)
    assert kinds == ["ShareUpdate", "ShareUpdate", "ShareState", "ShareUpdate", "ShareUpdate"]
    state = shard.states[KEY]
    assert state.start_offset == 10 and state.batches == [B(10, 14, ACK, 1)] and state.delivery_complete_count == 4
    assert shard.write_state(KEY, W(0, 0, 11, -1, [])).response.error_code == E.FENCED_LEADER_EPOCH
    # a new leader reads: its epoch is recorded, and the old leader is fenced from then on
    read = shard.read_state(KEY, 2)
    assert read.records and committed(shard, read).leader_epoch == 2
    assert shard.write_state(KEY, W(0, 1, 11, -1, [])).response.error_code == E.FENCED_LEADER_EPOCH
    assert shard.read_state(KEY, 1).response.error_code == E.FENCED_LEADER_EPOCH
    assert committed(shard, shard.initialize_state(KEY, 1, 50)).error_code == E.NONE
    assert shard.states[KEY].start_offset == 50 and shard.states[KEY].batches == []
    assert shard.initialize_state(KEY, 1, 60).response.error_code == E.FENCED_STATE_EPOCH
    assert shard.write_state(KEY, W(0, 3, 70, -1, [])).response.error_code == E.FENCED_STATE_EPOCH
    summary = shard.read_summary(KEY, 3)
    assert (summary.state_epoch, summary.start_offset) == (1, 50)
    committed(shard, shard.delete_state(KEY))
    assert KEY not in shard.states and shard.read_summary(KEY, 0).start_offset == -1


def test_an_update_of_an_older_snapshot_is_ignored_on_replay():
    shard = ShareCoordinatorShard(snapshot_every=10, clock_ms=lambda: 0)
    shard.replay(KEY, ShareState(snapshot_epoch=3, start_offset=5, batches=[B(5, 6, AV, 1)]))
    shard.replay(KEY, ShareUpdate(2, 1, 9, -1, (B(9, 9, ACK, 1),)))
    assert shard.states[KEY].start_offset == 5


@contextlib.asynccontextmanager
async def served(tmp_path, rm=None, epoch=0):
    with contextlib.ExitStack() as stack:
        if rm is None:
            rm = stack.enter_context(replica_manager(tmp_path, min_insync_replicas=1))
        coord = ShareCoordinator(
            CoordinatorPartitionLog(rm),
            component_config(ShareCoordinatorConfig, num_partitions=1, snapshot_every=3),
            clock_ms=lambda: 1_700_000_000_000,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(coord.run)
            partition = CoordinatorPartition(rm, coord, TOPIC, 0)
            partition.epoch = epoch  # a later leader epoch than the replica manager has seen
            await partition.heal()
            yield coord, partition, rm
            nursery.cancel_scope.cancel()


async def test_a_new_coordinator_loads_exactly_the_committed_states(tmp_path, autojump_clock):
    keys = [SharePartitionKey(g, uuid.UUID(int=7), p) for g in ("a", "b") for p in range(3)]
    with replica_manager(tmp_path, min_insync_replicas=1) as rm:
        async with served(tmp_path, rm) as (coord, _, _):
            for i in range(8):
                for key in keys:
                    answer = await coord.write_state(key, W(0, 1, i, i, [B(i, i + 2, AV, i % 3 + 1)]))
                    assert answer.error_code == E.NONE
            await coord.delete_state(keys[0])
            await coord.read_state(keys[1], 4)  # a new leader epoch, recorded
            expected = dict(coord.shard.states)
        assert keys[0] not in expected and expected[keys[1]].leader_epoch == 4
        async with served(tmp_path, rm, epoch=5) as (again, _, _):
            assert again.shard.states == expected


@pytest.mark.parametrize("mode", FAILURES)
async def test_a_failed_write_answers_kafkas_error_and_changes_nothing(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition, _):
        assert (await coord.write_state(KEY, W(0, 1, 0, -1, [B(0, 4, AV, 1)]))).error_code == E.NONE
        before = dict(coord.shard.states)
        answer = await partition.failing(mode, lambda: coord.write_state(KEY, W(0, 1, 2, -1, [B(2, 4, ACK, 1)])))
        assert answer.error_code == FAILURES[mode]
        if mode != "lost-leadership":
            assert coord.shard.states == before
        await partition.heal()
        assert (await coord.write_state(KEY, W(0, 1, 3, -1, []))).error_code == E.NONE


async def test_pruning_drops_only_records_no_state_needs(tmp_path, autojump_clock):
    keys = [SharePartitionKey(g, uuid.UUID(int=9), p) for g in ("a", "b") for p in range(2)]
    with replica_manager(tmp_path, min_insync_replicas=1) as rm:
        async with served(tmp_path, rm) as (coord, _, _):
            for i in range(10):  # a snapshot every 3 updates: old snapshots and updates pile up
                for key in keys:
                    assert (await coord.write_state(key, W(0, 1, i, i, [B(i, i + 2, AV, 1)]))).error_code == E.NONE
            await coord.delete_state(keys[0])  # its records go with the rest
            log = rm.get_partition(TOPIC, 0).log
            end = log.log_end_offset
            raised = await coord.prune()
            earliest = min(coord.shard.snapshot_offsets.values())
            assert raised == {0: earliest} and log.log_start_offset == earliest > 0
            assert await coord.prune() == {}  # nothing more to drop until a newer snapshot
            assert log.log_end_offset == end
            expected = dict(coord.shard.states)
        async with served(tmp_path, rm, epoch=5) as (again, _, _):  # loads from the pruned log
            assert again.shard.states == expected and keys[0] not in expected
