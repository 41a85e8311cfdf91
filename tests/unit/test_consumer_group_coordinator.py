"""The consumer group protocol's shell (coordinator/group/consumer_coordinator.py,
classic_members.py) without sockets: a real replica manager leads `__consumer_offsets`, requests go
straight to the coordinator, time is trio's autojump clock. Sessions and rebalance timeouts expire,
a reload rebuilds the same group, classic and consumer members convert the group both ways, and the
offset and admin APIs check member epochs and group types as Kafka does."""

import uuid

import trio
from test_group_coordinator import OFFSETS, N, coordinator, elect, join, join_new, wait_loaded

from coordinator.group import admin as group_admin
from coordinator.group.consumer_group import MemberState
from coordinator.group.consumer_heartbeat import HeartbeatRequest
from coordinator.group.records import OffsetAndMetadata
from protocol import consumer_protocol as cp
from protocol.errors import ErrorCode as E

TOPIC_ID = uuid.UUID(int=77)
CONSUMER = {
    "consumer_session_timeout_ms": 6000,
    "consumer_heartbeat_interval_ms": 500,
}


def _with_ids(coord):
    coord.metadata_cache.topic_ids["t"] = TOPIC_ID
    coord.metadata_cache.version += 1


def hb(member, epoch, owned=None, *, topics=("t",), group="g", instance=None, rebalance=30000):
    joining = epoch == 0
    return HeartbeatRequest(
        group,
        member,
        epoch,
        instance_id=instance,
        rebalance_timeout_ms=rebalance if joining else -1,
        subscribed_topic_names=topics if joining else None,
        owned={} if joining else owned,
        client_id="c",
        client_host="/127.0.0.1",
    )


def parts(answer) -> set:
    return {p for ps in (answer.assignment or {}).values() for p in ps}


async def test_a_silent_member_is_removed_after_its_session_and_the_other_takes_over(tmp_path, autojump_clock):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        a = await coord.consumer.consumer_group_heartbeat(hb("a", 0))
        b = await coord.consumer.consumer_group_heartbeat(hb("b", 0))
        assert a.error_code == b.error_code == E.NONE and parts(a) == {0, 1, 2, 3}
        # b heartbeats, a falls silent: 6 s later a is gone and b owns everything
        owned_b: dict = {}
        epoch_b = b.member_epoch
        for _ in range(40):
            answer = await coord.consumer.consumer_group_heartbeat(hb("b", epoch_b, owned_b))
            epoch_b = answer.member_epoch
            if answer.assignment is not None:
                owned_b = {TOPIC_ID: frozenset(parts(answer))}
            await trio.sleep(0.25)
        group = coord.manager.groups["g"].consumer
        assert list(group.members) == ["b"] and owned_b == {TOPIC_ID: frozenset({0, 1, 2, 3})}


async def test_a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout(tmp_path, autojump_clock):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        a = await coord.consumer.consumer_group_heartbeat(hb("a", 0, rebalance=2000))
        owned = {TOPIC_ID: frozenset(parts(a))}
        await coord.consumer.consumer_group_heartbeat(hb("b", 0))
        told = await coord.consumer.consumer_group_heartbeat(hb("a", a.member_epoch, owned))
        assert len(parts(told)) == 2  # revoke two
        group = coord.manager.groups["g"].consumer
        assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
        for _ in range(8):  # a keeps heartbeating, still owning all four
            await trio.sleep(0.5)
            b = await coord.consumer.consumer_group_heartbeat(hb("b", group.members["b"].member_epoch, {}))
            answer = await coord.consumer.consumer_group_heartbeat(hb("a", a.member_epoch, owned))
        assert answer.error_code == E.UNKNOWN_MEMBER_ID and "a" not in group.members
        b = await coord.consumer.consumer_group_heartbeat(hb("b", group.members["b"].member_epoch, {}))
        assert parts(b) == {0, 1, 2, 3}


async def test_a_reload_rebuilds_the_same_group_and_a_leave_bumps_the_epoch(tmp_path, autojump_clock):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        await coord.consumer.consumer_group_heartbeat(hb("a", 0, instance="i-a"))
        await coord.consumer.consumer_group_heartbeat(hb("b", 0))
        group = coord.manager.groups["g"].consumer
        for _ in range(4):
            for mid in list(group.members):
                m = group.members[mid]
                await coord.consumer.consumer_group_heartbeat(hb(mid, m.member_epoch, dict(m.assigned)))
        before = (dict(group.members), dict(group.target), group.group_epoch, group.assignment_epoch)
        rm_partitions = coord.runtime.partition_log
        for p in range(N):
            coord.on_resignation((OFFSETS, p), 0)
        assert "g" not in coord.manager.groups
        await elect(rm_partitions.replica_manager, coord, epoch=1)
        await wait_loaded(coord)
        loaded = coord.manager.groups["g"].consumer
        assert (dict(loaded.members), dict(loaded.target), loaded.group_epoch, loaded.assignment_epoch) == before
        assert loaded.static_members == {"i-a": "a"}
        answer = await coord.consumer.consumer_group_heartbeat(hb("b", -1))
        assert answer.member_epoch == -1 and loaded.group_epoch == before[2] + 1


async def test_commits_and_fetches_check_the_member_epoch(tmp_path, autojump_clock):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        a = await coord.consumer.consumer_group_heartbeat(hb("a", 0))
        epoch = a.member_epoch
        offsets = {("t", 0): OffsetAndMetadata(5)}
        assert await coord.offsets.commit_offsets("g", epoch, "a", None, offsets) == {("t", 0): E.NONE}
        assert await coord.offsets.commit_offsets("g", epoch - 1, "a", None, offsets) == {
            ("t", 0): E.STALE_MEMBER_EPOCH
        }
        assert await coord.offsets.commit_offsets("g", epoch + 1, "a", None, offsets) == {
            ("t", 0): E.FENCED_MEMBER_EPOCH
        }
        assert await coord.offsets.commit_offsets("g", epoch, "zz", None, offsets) == {("t", 0): E.UNKNOWN_MEMBER_ID}
        assert await coord.offsets.commit_offsets("g", -1, "", None, offsets) == {("t", 0): E.UNKNOWN_MEMBER_ID}
        # KIP-447's transactional commits carry the member epoch too
        assert await coord.txn_offsets.txn_commit_offsets("g", 7, 0, epoch, "a", None, offsets) == {("t", 0): E.NONE}
        stale = await coord.txn_offsets.txn_commit_offsets("g", 7, 0, epoch - 1, "a", None, offsets)
        assert stale == {("t", 0): E.ILLEGAL_GENERATION}
        assert coord.offsets.fetch_offsets("g", [("t", 0)], ("a", epoch))[0] == E.NONE
        assert coord.offsets.fetch_offsets("g", [("t", 0)], ("a", epoch + 3))[0] == E.STALE_MEMBER_EPOCH
        assert coord.offsets.fetch_offsets("g", [("t", 0)], (None, -1))[1][("t", 0)].offset == 5  # an admin's fetch
        # types and admin: listed as a consumer group, not deletable while it has members
        listed = group_admin.list_groups(coord.manager, [], ["consumer"]).groups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed] == [("g", "consumer", "Stable")]
        assert group_admin.list_groups(coord.manager, [], ["classic"]).groups == []
        assert await group_admin.delete_group(coord.manager, "g") == E.NON_EMPTY_GROUP
        subscribed = await coord.offsets.delete_offsets("g", [("t", 0), ("other", 0)])
        assert subscribed == (E.NONE, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): E.NONE})
        described = group_admin.describe_consumer_group(coord, "g")
        assert described.group_epoch == 1 and described.members[0].member_epoch == epoch
        assert group_admin.describe_consumer_group(coord, "nope").error_code == E.GROUP_ID_NOT_FOUND
        await coord.consumer.consumer_group_heartbeat(hb("a", -1))
        assert await coord.offsets.commit_offsets("g", -1, "", None, offsets) == {
            ("t", 0): E.NONE
        }  # empty: simple commits
        assert await group_admin.delete_group(coord.manager, "g") == E.NONE
        assert "g" not in coord.manager.groups


async def test_a_commit_that_raced_an_epoch_bump_is_accepted_for_partitions_still_owned(tmp_path, autojump_clock):
    """KIP-1251: a commit sent at the epoch before the heartbeat that bumped it is accepted for
    the partitions the member has held since that epoch, and refused (STALE_MEMBER_EPOCH, or
    ILLEGAL_GENERATION when transactional) for one it gave up."""
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        a = await coord.consumer.consumer_group_heartbeat(hb("a", 0))
        old = a.member_epoch
        owned = {TOPIC_ID: frozenset(parts(a))}
        await coord.consumer.consumer_group_heartbeat(hb("b", 0))
        kept = parts(await coord.consumer.consumer_group_heartbeat(hb("a", old, owned)))
        bumped = await coord.consumer.consumer_group_heartbeat(hb("a", old, {TOPIC_ID: frozenset(kept)}))
        assert bumped.member_epoch > old and len(kept) == 2
        given_up = ({0, 1, 2, 3} - kept).pop()
        still = {("t", min(kept)): OffsetAndMetadata(5)}
        moved = {("t", given_up): OffsetAndMetadata(5)}
        assert await coord.offsets.commit_offsets("g", old, "a", None, still) == {("t", min(kept)): E.NONE}
        assert await coord.offsets.commit_offsets("g", old, "a", None, moved) == {("t", given_up): E.STALE_MEMBER_EPOCH}
        both = {**still, **moved}
        assert set((await coord.offsets.commit_offsets("g", old, "a", None, both)).values()) == {E.STALE_MEMBER_EPOCH}
        assert await coord.txn_offsets.txn_commit_offsets("g", 7, 0, old, "a", None, still) == {
            ("t", min(kept)): E.NONE
        }
        stale = await coord.txn_offsets.txn_commit_offsets("g", 7, 0, old, "a", None, moved)
        assert stale == {("t", given_up): E.ILLEGAL_GENERATION}
        # b was given its partitions at its current epoch: an older one is stale for them
        group = coord.manager.groups["g"].consumer
        b = await coord.consumer.consumer_group_heartbeat(hb("b", group.members["b"].member_epoch, {}))
        mine = {("t", min(parts(b))): OffsetAndMetadata(1)}
        assert await coord.offsets.commit_offsets("g", b.member_epoch - 1, "b", None, mine) == {
            ("t", min(parts(b))): E.STALE_MEMBER_EPOCH
        }
        assert await coord.offsets.commit_offsets("g", b.member_epoch, "b", None, mine) == {
            ("t", min(parts(b))): E.NONE
        }


async def test_a_classic_group_upgrades_when_a_consumer_member_joins_and_downgrades_when_it_leaves(
    tmp_path, autojump_clock
):
    async with coordinator(tmp_path, **CONSUMER) as coord:
        _with_ids(coord)
        joined = await join_new(coord)
        me, gen = joined.member_id, joined.generation_id
        synced = await coord.sync_group("g", gen, me, None, None, None, {me: cp.encode_assignment({"t": [0, 1, 2, 3]})})
        assert synced.error_code == E.NONE
        # a consumer-protocol member joins: the group converts, the classic member keeps its partitions
        b = await coord.consumer.consumer_group_heartbeat(hb("b", 0))
        assert b.error_code == E.NONE
        holder = coord.manager.groups["g"]
        assert holder.group_type == "consumer" and set(holder.consumer.members) == {me, "b"}
        assert holder.consumer.members[me].metadata.classic is not None
        # the classic member is told to rejoin, rejoins as a member of the consumer group
        assert coord.heartbeat("g", gen, me, None) == E.REBALANCE_IN_PROGRESS
        again = await coord.join_group(join("g", me))
        assert again.error_code == E.NONE and again.protocol_type == "consumer" and again.leader == ""
        synced = await coord.sync_group("g", again.generation_id, me, None, "consumer", "range", {})
        assert synced.error_code == E.NONE
        mine = cp.decode_assignment(bytes(synced.assignment))
        assert 0 < sum(len(ps) for ps in mine.values()) < 4  # it gave up some for b
        # the consumer member leaves: the group is classic again, generation = the group epoch
        epoch = holder.consumer.group_epoch
        member_epoch = holder.consumer.members[me].member_epoch
        left = await coord.consumer.consumer_group_heartbeat(hb("b", -1))
        assert left.member_epoch == -1 and holder.group_type == "classic" and holder.generation_id == epoch
        offsets = {("t", 0): OffsetAndMetadata(9)}
        # its commits of its own epoch are accepted until it rejoins
        assert await coord.offsets.commit_offsets("g", member_epoch, me, None, offsets) == {("t", 0): E.NONE}
