"""Every write of the group coordinator meets a failed append (issue 45): NOT_ENOUGH_REPLICAS (an
ISR below min.insync.replicas), a timeout (a follower in the ISR that never fetches) and a lost
leadership (the partition moves while the append waits). The answer carries Kafka's error, the
group is as last committed, and the group works on the next request once the partition heals.

No process and no test double: a real replica manager over real logs leads `__consumer_offsets`;
the failures are real states of that partition, set by LeaderAndIsr as a controller would. Time
is trio's autojump clock."""

import contextlib

import pytest
from coordinator_partition import FAILURES, CoordinatorPartition
from test_consumer_group_coordinator import CONSUMER, _with_ids, hb
from test_group_coordinator import OFFSETS, coordinator, join_new

from coordinator.group import admin as group_admin
from coordinator.group.group_metadata import GroupState
from coordinator.group.records import OffsetAndMetadata
from protocol import consumer_protocol as cp
from protocol.errors import ErrorCode as E

OM = OffsetAndMetadata


@contextlib.asynccontextmanager
async def served(tmp_path):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        rm = coord.manager.runtime.partition_log.replica_manager
        yield coord, CoordinatorPartition(rm, coord, OFFSETS, coord.manager.partition_for("g"))


@pytest.mark.parametrize("mode", FAILURES)
async def test_offset_commit(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        assert await coord.offsets.commit_offsets("g", -1, "", None, {("t", 0): OM(5, -1, "", 1)}) == {("t", 0): E.NONE}
        answer = await partition.failing(
            mode, lambda: coord.offsets.commit_offsets("g", -1, "", None, {("t", 0): OM(9, -1, "", 2)})
        )
        assert answer == {("t", 0): FAILURES[mode]}
        if mode == "lost-leadership":  # resigned: the groups of the partition are unloaded
            assert coord.offsets.fetch_offsets("g", [("t", 0)]) == (E.NOT_COORDINATOR, {})
        else:
            assert coord.offsets.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
        await partition.heal()
        # a timed-out write stays unapplied here (the log commits it once the ISR shrinks, and the
        # next load replays it); after a lost leadership the reload replays this broker's log,
        # which holds the write, and as the leader again it commits it (Kafka's log does the same)
        assert coord.offsets.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == (
            9 if mode == "lost-leadership" else 5
        )
        assert await coord.offsets.commit_offsets("g", -1, "", None, {("t", 0): OM(11, -1, "", 3)}) == {
            ("t", 0): E.NONE
        }
        assert coord.offsets.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 11


@pytest.mark.parametrize("mode", FAILURES)
async def test_txn_offset_commit(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        offsets = {("t", 1): OM(4, -1, "", 1)}
        answer = await partition.failing(
            mode, lambda: coord.txn_offsets.txn_commit_offsets("g", 7, 0, -1, "", None, offsets)
        )
        assert answer == {("t", 1): FAILURES[mode]}
        if mode != "lost-leadership":
            assert coord.txn_offsets.unstable_partitions("g") == set()  # nothing pending: not committed
        await partition.heal()
        assert await coord.txn_offsets.txn_commit_offsets("g", 8, 0, -1, "", None, offsets) == {("t", 1): E.NONE}
        assert ("t", 1) in coord.txn_offsets.unstable_partitions("g")


@pytest.mark.parametrize("mode", FAILURES)
async def test_sync_group_storing_the_assignment(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        joined = await join_new(coord)
        me, generation = joined.member_id, joined.generation_id
        assignment = cp.encode_assignment({"t": [0, 1, 2, 3]})
        answer = await partition.failing(
            mode, lambda: coord.sync_group("g", generation, me, None, "consumer", "range", {me: assignment})
        )
        assert answer.error_code == FAILURES[mode]
        if mode != "lost-leadership":  # Kafka: the members are told, and the group rebalances
            group = coord.manager.groups["g"]
            assert group.state is GroupState.PREPARING_REBALANCE and group.members[me].assignment == b""
        await partition.heal()
        joined = await join_new(coord)
        me, generation = joined.member_id, joined.generation_id
        synced = await coord.sync_group("g", generation, me, None, "consumer", "range", {me: assignment})
        assert synced.error_code == E.NONE and synced.assignment == assignment
        assert coord.manager.groups["g"].state is GroupState.STABLE


@pytest.mark.parametrize("mode", FAILURES)
async def test_consumer_group_heartbeat(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        _with_ids(coord)
        answer = await partition.failing(mode, lambda: coord.consumer.consumer_group_heartbeat(hb("m1", 0)))
        assert answer.error_code == FAILURES[mode]
        if mode != "lost-leadership":
            assert "g" not in coord.manager.groups  # the group was never committed
        await partition.heal()
        joined = await coord.consumer.consumer_group_heartbeat(hb("m1", 0))
        assert joined.error_code == E.NONE and joined.member_epoch >= 1


@pytest.mark.parametrize("mode", FAILURES)
async def test_delete_group(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        await coord.offsets.commit_offsets("g", -1, "", None, {("t", 2): OM(3, -1, "", 1)})
        answer = await partition.failing(mode, lambda: group_admin.delete_group(coord.manager, "g"))
        assert answer == FAILURES[mode]
        if mode != "lost-leadership":
            assert coord.offsets.fetch_offsets("g", None) == (E.NONE, {("t", 2): OM(3, -1, "", 1)})
        await partition.heal()
        if "g" in coord.manager.groups:  # lost leadership: the reload may have replayed the tombstones
            assert await group_admin.delete_group(coord.manager, "g") == E.NONE
        assert "g" not in coord.manager.groups and coord.offsets.fetch_offsets("g", None) == (E.NONE, {})
