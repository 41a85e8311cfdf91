"""The group coordinator without sockets: a real replica manager over real logs in a temp dir
leads `__consumer_offsets` (RF 1), requests go straight to `GroupCoordinator`, time is trio's
autojump clock. Every error code asserted here is the one Kafka 3.x answers in that situation."""

import contextlib

import pytest
import trio
from broker_helpers import component_config, leader_and_isr, replica_manager

from broker.coordinator_log import CoordinatorPartitionLog
from broker.metadata_cache import PartitionState
from coordinator.group import admin as group_admin
from coordinator.group.config import GroupCoordinatorConfig
from coordinator.group.coordinator import GroupCoordinator, JoinRequest
from coordinator.group.group_metadata import GroupState
from coordinator.group.records import OffsetAndMetadata
from coordinator.group.results import ListedGroup, ListedGroups
from protocol import consumer_protocol as cp
from protocol.control_records import marker_batch
from protocol.errors import ErrorCode as E

OFFSETS = "__consumer_offsets"
N = 3  # offsets partitions in these tests


@contextlib.asynccontextmanager
async def coordinator(tmp_path, **config):
    """A running coordinator leading every offsets partition; topic "t" (4 partitions) exists."""
    settings = {"offsets_topic_num_partitions": N, "initial_rebalance_delay_ms": 0} | config
    with replica_manager(tmp_path, min_insync_replicas=1) as rm:
        for p in range(4):
            rm.metadata_cache.partitions.setdefault("t", {})[p] = PartitionState("t", p, 1, 0, (1,), (1,))
        coord = GroupCoordinator(
            CoordinatorPartitionLog(rm), rm.metadata_cache, component_config(GroupCoordinatorConfig, **settings)
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(coord.run)
            await elect(rm, coord, epoch=0)
            await wait_loaded(coord)
            yield coord
            nursery.cancel_scope.cancel()


async def elect(rm, coord, epoch):
    body = leader_and_isr({(OFFSETS, p): (1, [1], [1]) for p in range(N)}, leader_epoch=epoch)

    def changed(leaders, followers):
        for p in leaders:
            coord.on_election(p.tp, p.leader_epoch)

    await rm.become_leader_or_follower(body, 7, changed)


async def wait_loaded(coord):
    while coord.runtime.loading or len(coord.runtime.owned) < N:
        await trio.sleep(0.01)


SUB = cp.encode_subscription(["t"])


def join(group="g", member="", *, instance=None, protocols=None, session=10000, rebalance=30000, known=True):
    return JoinRequest(
        group,
        member,
        instance,
        "client",
        "/127.0.0.1",
        session,
        rebalance,
        "consumer",
        protocols or [("range", SUB)],
        known,
    )


async def join_new(coord, group="g", **kw):
    """KIP-394's two steps: MEMBER_ID_REQUIRED with an id, then the real join."""
    first = await coord.join_group(join(group, **kw))
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    return await coord.join_group(join(group, first.member_id, **kw))


async def test_single_member_joins_syncs_commits_and_fetches(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        joined = await join_new(coord)
        assert joined.error_code == E.NONE and joined.generation_id == 1
        assert joined.leader == joined.member_id and joined.protocol_name == "range"
        assert [m.member_id for m in joined.members] == [joined.member_id]
        me, gen = joined.member_id, joined.generation_id
        assignment = cp.encode_assignment({"t": [0, 1, 2, 3]})
        synced = await coord.sync_group("g", gen, me, None, "consumer", "range", {me: assignment})
        assert synced.error_code == E.NONE and synced.assignment == assignment
        assert coord.manager.groups["g"].state is GroupState.STABLE
        assert coord.heartbeat("g", gen, me, None) == E.NONE
        results = await coord.offsets.commit_offsets("g", gen, me, None, {("t", 0): OffsetAndMetadata(5, 2, "m", 1)})
        assert results == {("t", 0): E.NONE}
        error, found = coord.offsets.fetch_offsets("g", [("t", 0), ("t", 1)])
        assert error == E.NONE and found == {("t", 0): OffsetAndMetadata(5, 2, "m", 1), ("t", 1): None}


async def test_everything_survives_a_new_coordinator_replaying_the_log(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        joined = await coord.join_group(join(instance="static-1"))  # static: no MEMBER_ID_REQUIRED step
        me = joined.member_id
        await coord.sync_group("g", 1, me, "static-1", None, None, {me: b"A"})
        await coord.offsets.commit_offsets("g", 1, me, None, {("t", 1): OffsetAndMetadata(7, 3, "x", 10)})
        await coord.offsets.commit_offsets("g", 1, me, None, {("t", 1): OffsetAndMetadata(9, 3, "y", 11)})
        await coord.offsets.commit_offsets("simple", -1, "", None, {("t", 2): OffsetAndMetadata(3, -1, "", 12)})
        await coord.offsets.commit_offsets("gone", -1, "", None, {("t", 3): OffsetAndMetadata(1, -1, "", 12)})
        assert await group_admin.delete_group(coord.manager, "gone") == E.NONE
    async with coordinator(tmp_path) as coord:  # a new broker process over the same logs
        group = coord.manager.groups["g"]
        assert group.state is GroupState.STABLE and group.generation_id == 1
        assert group.members[me].assignment == b"A" and group.static_members == {"static-1": me}
        assert coord.offsets.fetch_offsets("g", None) == (E.NONE, {("t", 1): OffsetAndMetadata(9, 3, "y", 11)})
        assert coord.offsets.fetch_offsets("simple", None) == (E.NONE, {("t", 2): OffsetAndMetadata(3, -1, "", 12)})
        assert coord.manager.groups["simple"].state is GroupState.EMPTY
        assert "gone" not in coord.manager.groups
        # the loaded member heartbeats on; without heartbeats it expires after its session
        assert coord.heartbeat("g", 1, me, "static-1") == E.NONE
        await trio.sleep(11)
        assert coord.heartbeat("g", 1, me, "static-1") == E.UNKNOWN_MEMBER_ID


async def test_three_members_rebalance_and_a_leaving_one_triggers_the_next(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        results = {}

        async def member(name):
            results[name] = await join_new(coord)

        async with trio.open_nursery() as n:
            for name in "abc":
                n.start_soon(member, name)
        assert {r.error_code for r in results.values()} == {E.NONE}
        assert {r.generation_id for r in results.values()} == {1}
        leaders = [r for r in results.values() if r.members]
        assert len(leaders) == 1 and len(leaders[0].members) == 3
        ids = [r.member_id for r in results.values()]
        synced = {}

        async def sync(mid):
            given = {m: m.encode() for m in ids} if mid == leaders[0].member_id else {}
            synced[mid] = await coord.sync_group("g", 1, mid, None, None, None, given)

        async with trio.open_nursery() as n:
            for mid in ids:
                n.start_soon(sync, mid)
        assert {mid: r.assignment for mid, r in synced.items()} == {m: m.encode() for m in ids}
        # one leaves: the others are told to rejoin by their heartbeat
        assert coord.leave_group("g", [(ids[0], None)]) == (E.NONE, [E.NONE])
        assert coord.heartbeat("g", 1, ids[1], None) == E.REBALANCE_IN_PROGRESS
        rejoined = {}

        async def rejoin(mid):
            rejoined[mid] = await coord.join_group(join("g", mid))

        async with trio.open_nursery() as n:
            for mid in ids[1:]:
                n.start_soon(rejoin, mid)
        assert {r.generation_id for r in rejoined.values()} == {2}
        assert coord.heartbeat("g", 1, ids[1], None) == E.ILLEGAL_GENERATION
        assert coord.leave_group("g", [(ids[0], None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])


async def test_a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        a = await join_new(coord, rebalance=5000)
        await coord.sync_group("g", 1, a.member_id, None, None, None, {})
        started = trio.current_time()
        b = await join_new(coord, rebalance=5000)  # a never rejoins: b waits the rebalance timeout
        assert 5 <= trio.current_time() - started < 6
        assert b.generation_id == 2 and b.leader == b.member_id and len(b.members) == 1
        assert coord.heartbeat("g", 2, a.member_id, None) == E.UNKNOWN_MEMBER_ID


async def test_session_timeout_expires_a_silent_member(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        a = await join_new(coord, session=6000)
        await coord.sync_group("g", 1, a.member_id, None, None, None, {})
        for _ in range(5):  # heartbeats keep it
            await trio.sleep(4)
            assert coord.heartbeat("g", 1, a.member_id, None) == E.NONE
        await trio.sleep(6.2)
        assert coord.heartbeat("g", 1, a.member_id, None) == E.UNKNOWN_MEMBER_ID
        assert coord.manager.groups["g"].state is GroupState.EMPTY


async def test_a_member_loaded_by_a_new_coordinator_expires_after_its_session(tmp_path, autojump_clock):
    """Issue 33 (1): a reloaded member's session deadline is on the coordinator's monotonic clock;
    a member that died with the old coordinator is removed `session.timeout.ms` after the load,
    and a member that joins meanwhile completes its rebalance without waiting for it."""
    async with coordinator(tmp_path) as coord:
        dead = await join_new(coord, session=6000)
        await coord.sync_group("g", 1, dead.member_id, None, None, None, {dead.member_id: b"A"})
    async with coordinator(tmp_path) as coord:  # a new coordinator over the same log
        loaded_at = trio.current_time()
        assert dead.member_id in coord.manager.groups["g"].members
        fresh = await join_new(coord, session=6000, rebalance=300_000)
        assert fresh.error_code == E.NONE and [m.member_id for m in fresh.members] == [fresh.member_id]
        assert trio.current_time() - loaded_at < 7  # the session, not the 300 s rebalance timeout
        assert coord.heartbeat("g", 1, dead.member_id, None) == E.UNKNOWN_MEMBER_ID


async def test_initial_rebalance_delay_gathers_the_first_members(tmp_path, autojump_clock):
    async with coordinator(tmp_path, initial_rebalance_delay_ms=3000) as coord:
        results = []

        async def member(delay):
            await trio.sleep(delay)
            results.append(await join_new(coord))

        started = trio.current_time()
        async with trio.open_nursery() as n:
            n.start_soon(member, 0)
            n.start_soon(member, 2)  # arrives within the first delay: the delay is extended once
        assert {r.generation_id for r in results} == {1} and len(results) == 2
        assert 6 <= trio.current_time() - started < 7


async def test_static_member_restart_gets_its_assignment_without_a_rebalance(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        first = await coord.join_group(join(instance="host-1"))  # static members skip MEMBER_ID_REQUIRED
        old = first.member_id
        await coord.sync_group("g", 1, old, "host-1", None, None, {old: b"mine"})
        again = await coord.join_group(join(instance="host-1"))  # restarted: no member id
        new = again.member_id
        assert again.error_code == E.NONE and new != old and again.generation_id == 1
        assert coord.manager.groups["g"].state is GroupState.STABLE
        synced = await coord.sync_group("g", 1, new, "host-1", None, None, {})
        assert synced.assignment == b"mine"
        # the old instance is fenced everywhere
        assert coord.heartbeat("g", 1, old, "host-1") == E.FENCED_INSTANCE_ID
        assert (await coord.sync_group("g", 1, old, "host-1", None, None, {})).error_code == E.FENCED_INSTANCE_ID
        assert (await coord.join_group(join("g", old, instance="host-1"))).error_code == E.FENCED_INSTANCE_ID
        commit = await coord.offsets.commit_offsets("g", 1, old, "host-1", {("t", 0): OffsetAndMetadata(1)})
        assert commit == {("t", 0): E.FENCED_INSTANCE_ID}
        assert coord.leave_group("g", [(old, "host-1")]) == (E.NONE, [E.FENCED_INSTANCE_ID])


@pytest.mark.parametrize(
    "request_kw, expected",
    [
        ({"group": ""}, E.INVALID_GROUP_ID),
        ({"session": 5999}, E.INVALID_SESSION_TIMEOUT),
        ({"session": 1800001}, E.INVALID_SESSION_TIMEOUT),
        ({"member": "never-seen"}, E.UNKNOWN_MEMBER_ID),
    ],
)
async def test_join_errors(tmp_path, autojump_clock, request_kw, expected):
    async with coordinator(tmp_path) as coord:
        assert (await coord.join_group(join(**request_kw))).error_code == expected


async def test_inconsistent_protocols_and_group_max_size(tmp_path, autojump_clock):
    async with coordinator(tmp_path, max_size=1) as coord:
        a = await join_new(coord)
        bad_type = join()
        bad_type = JoinRequest(**{**bad_type.__dict__, "protocol_type": "connect"})
        assert (await coord.join_group(bad_type)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
        no_common = await coord.join_group(join(protocols=[("sticky", SUB)]))
        assert no_common.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        full = await coord.join_group(join())
        assert full.error_code == E.GROUP_MAX_SIZE_REACHED
        assert a.error_code == E.NONE


async def test_offset_commit_errors(tmp_path, autojump_clock):
    async with coordinator(tmp_path, offset_metadata_max_bytes=10) as coord:
        a = await join_new(coord)
        me = a.member_id
        ok = OffsetAndMetadata(1)
        # CompletingRebalance: not yet
        assert await coord.offsets.commit_offsets("g", 1, me, None, {("t", 0): ok}) == {
            ("t", 0): E.REBALANCE_IN_PROGRESS
        }
        await coord.sync_group("g", 1, me, None, None, None, {})
        result = await coord.offsets.commit_offsets(
            "g",
            1,
            me,
            None,
            {("t", 0): ok, ("t", 1): OffsetAndMetadata(1, -1, "x" * 11), ("nope", 0): ok, ("t", 9): ok},
        )
        assert result == {
            ("t", 0): E.NONE,
            ("t", 1): E.OFFSET_METADATA_TOO_LARGE,
            ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert await coord.offsets.commit_offsets("g", 0, me, None, {("t", 0): ok}) == {("t", 0): E.ILLEGAL_GENERATION}
        assert await coord.offsets.commit_offsets("g", 1, "who", None, {("t", 0): ok}) == {
            ("t", 0): E.UNKNOWN_MEMBER_ID
        }
        # a simple commit to an active group is refused; to an unknown group with a generation too
        assert await coord.offsets.commit_offsets("g", -1, "", None, {("t", 0): ok}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
        assert await coord.offsets.commit_offsets("new", 3, "m", None, {("t", 0): ok}) == {
            ("t", 0): E.ILLEGAL_GENERATION
        }
        assert coord.group_error("") == E.INVALID_GROUP_ID


async def test_sync_and_heartbeat_errors(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        assert (await coord.sync_group("g", 1, "m", None, None, None, {})).error_code == E.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("g", 1, "m", None) == E.UNKNOWN_MEMBER_ID
        assert coord.heartbeat("", 1, "m", None) == E.INVALID_GROUP_ID
        a = await join_new(coord)
        me = a.member_id
        assert (await coord.sync_group("g", 2, me, None, None, None, {})).error_code == E.ILLEGAL_GENERATION
        bad = await coord.sync_group("g", 1, me, None, "consumer", "roundrobin", {})
        assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
        # heartbeat during CompletingRebalance is fine (the member is between join and sync)
        assert coord.heartbeat("g", 1, me, None) == E.NONE


async def test_not_coordinator_after_resignation_and_load_in_progress(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        results = []

        async def member():
            results.append(await join_new(coord))

        async with trio.open_nursery() as n:
            n.start_soon(member)
            n.start_soon(member)
        a, b = results
        partition = coord.manager.partition_for("g")
        waiting = {}

        async def rejoin():  # changed metadata: a rebalance that waits for b
            waiting["r"] = await coord.join_group(join("g", a.member_id, protocols=[("range", b"new")]))

        async with trio.open_nursery() as n:
            n.start_soon(rejoin)
            await trio.sleep(0.5)
            assert "r" not in waiting
            coord.on_resignation((OFFSETS, partition), 1)
        assert waiting["r"].error_code == E.NOT_COORDINATOR
        assert coord.heartbeat("g", 1, a.member_id, None) == E.NOT_COORDINATOR
        assert coord.offsets.fetch_offsets("g", None)[0] == E.NOT_COORDINATOR
        coord.runtime.begin_loading(partition, 5)
        assert coord.heartbeat("g", 1, a.member_id, None) == E.COORDINATOR_LOAD_IN_PROGRESS


async def test_list_describe_delete_and_offset_delete(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        a = await join_new(coord)
        me = a.member_id
        await coord.sync_group("g", 1, me, None, None, None, {me: cp.encode_assignment({"t": [0]})})
        await coord.offsets.commit_offsets(
            "g", 1, me, None, {("t", 0): OffsetAndMetadata(4), ("other", 0): OffsetAndMetadata(1)}
        )
        await coord.offsets.commit_offsets("s", -1, "", None, {("t", 0): OffsetAndMetadata(2)})
        assert group_admin.list_groups(coord.manager, [], []) == ListedGroups(
            E.NONE,
            [ListedGroup("g", "consumer", "Stable", "classic"), ListedGroup("s", "", "Empty", "classic")],
        )
        assert [g.group_id for g in group_admin.list_groups(coord.manager, ["empty"], []).groups] == ["s"]
        assert group_admin.list_groups(coord.manager, [], ["consumer"]).groups == []
        described = group_admin.describe_group(coord.manager, "g")
        assert described.group_state == "Stable" and described.protocol_data == "range"
        assert described.members[0].member_assignment == cp.encode_assignment({"t": [0]})
        assert described.members[0].client_host == "/127.0.0.1"
        assert group_admin.describe_group(coord.manager, "unknown").group_state == "Dead"
        assert await group_admin.delete_group(coord.manager, "g") == E.NON_EMPTY_GROUP
        assert await group_admin.delete_group(coord.manager, "unknown") == E.GROUP_ID_NOT_FOUND
        # offsets of a subscribed topic stay while the group is active; others may go
        error, per = await coord.offsets.delete_offsets("g", [("t", 0), ("other", 0)])
        assert error == E.NONE and per == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE}
        assert coord.offsets.fetch_offsets("g", None)[1] == {("t", 0): OffsetAndMetadata(4)}
        assert (await coord.offsets.delete_offsets("unknown", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND
        assert await group_admin.delete_group(coord.manager, "s") == E.NONE
        assert coord.offsets.fetch_offsets("s", None) == (E.NONE, {})


async def test_offsets_of_an_empty_group_expire_after_the_retention(tmp_path, autojump_clock):
    now = [1_000_000]
    async with coordinator(tmp_path, offsets_retention_ms=60_000) as coord:
        coord.wall_clock_ms = lambda: now[0]
        await coord.offsets.commit_offsets("s", -1, "", None, {("t", 0): OffsetAndMetadata(2, -1, "", now[0])})
        assert await coord.offsets.expire_offsets(now[0] + 59_000) == 0
        assert await coord.offsets.expire_offsets(now[0] + 61_000) == 1
        assert coord.offsets.fetch_offsets("s", None) == (E.NONE, {})


async def test_a_new_leader_epoch_keeps_the_groups_and_a_resignation_then_election_reloads(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        a = await join_new(coord)
        me = a.member_id
        await coord.sync_group("g", 1, me, None, None, None, {me: b"A"})
        await coord.offsets.commit_offsets("g", 1, me, None, {("t", 0): OffsetAndMetadata(3)})
        rm = coord.runtime.partition_log.replica_manager
        group = coord.manager.groups["g"]
        await elect(rm, coord, epoch=1)  # e.g. the controller shrank the ISR: still the leader here
        assert coord.manager.groups["g"] is group and not coord.runtime.loading
        assert coord.heartbeat("g", 1, me, None) == E.NONE
        partition = coord.manager.partition_for("g")
        coord.on_resignation((OFFSETS, partition), 1)
        assert coord.heartbeat("g", 1, me, None) == E.NOT_COORDINATOR
        await elect(rm, coord, epoch=2)
        await wait_loaded(coord)
        reloaded = coord.manager.groups["g"]
        assert reloaded is not group and reloaded.members[me].assignment == b"A"
        assert coord.offsets.fetch_offsets("g", None) == (E.NONE, {("t", 0): OffsetAndMetadata(3)})


async def test_a_static_member_that_misses_a_rebalance_keeps_its_place_until_its_session_expires(
    tmp_path, autojump_clock
):
    async with coordinator(tmp_path) as coord:
        s = await coord.join_group(join(instance="host-s", session=20000, rebalance=5000))
        await coord.sync_group("g", 1, s.member_id, "host-s", None, None, {})
        d = await join_new(coord, rebalance=5000)  # s never rejoins: the rebalance times out
        # Kafka keeps the static member, and a member that did rejoin leads (maybeElectNewJoinedLeader)
        assert d.generation_id == 2 and d.leader == d.member_id
        assert sorted(m.member_id for m in d.members) == sorted([s.member_id, d.member_id])
        await coord.sync_group("g", 2, d.member_id, None, None, None, {})
        for _ in range(10):  # d heartbeats; s is silent: removed 20 s after the last generation began
            await trio.sleep(2.5)
            coord.heartbeat("g", coord.manager.groups["g"].generation_id, d.member_id, None)
        assert not coord.manager.groups["g"].has(s.member_id)


def offsets_state(coord) -> dict:
    """Every group's committed offsets (with their log offsets) and pending transactional ones."""
    return {
        g.group_id: (
            dict(g.offsets),
            dict(g.offset_log_offsets),
            {pid: dict(by_tp) for pid, by_tp in g.pending_txn_offsets.items() if by_tp},
        )
        for g in coord.manager.groups.values()
    }


async def test_a_load_rebuilds_exactly_the_offsets_the_writes_built(tmp_path, autojump_clock):
    """Offset records, transactional offset records and their markers replay through one path
    (`coordinator.group.offset_replay`) for the runtime's writes and for a load."""
    async with coordinator(tmp_path) as coord:
        commit, txn_commit = coord.offsets.commit_offsets, coord.txn_offsets.txn_commit_offsets
        await commit("s", -1, "", None, {("t", 0): OffsetAndMetadata(1), ("t", 1): OffsetAndMetadata(2)})
        await txn_commit("s", 7, 0, -1, "", None, {("t", 0): OffsetAndMetadata(5)})  # committed below
        await txn_commit("s", 8, 0, -1, "", None, {("t", 1): OffsetAndMetadata(6)})  # aborted below
        await txn_commit("s", 9, 0, -1, "", None, {("t", 2): OffsetAndMetadata(7)})  # left open
        await commit("s", -1, "", None, {("t", 3): OffsetAndMetadata(4)})
        partition = coord.manager.partition_for("s")
        for producer_id, committed in ((7, True), (8, False)):
            batch = marker_batch(producer_id, 0, 0, committed)
            outcome = await coord.runtime.partition_log.append((OFFSETS, partition), batch, 1000)
            assert outcome.error == E.NONE
            coord.txn_offsets.complete_txn(producer_id, [partition], committed)
        assert (await coord.offsets.delete_offsets("s", [("t", 3)]))[0] == E.NONE
        live = offsets_state(coord)
        offsets, _, pending = live["s"]
        assert offsets == {("t", 0): OffsetAndMetadata(5), ("t", 1): OffsetAndMetadata(2)}
        assert list(pending) == [9] and pending[9][("t", 2)][0] == OffsetAndMetadata(7)
    async with coordinator(tmp_path) as coord:  # a new coordinator replays the same log
        assert offsets_state(coord) == live
