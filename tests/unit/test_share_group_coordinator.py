"""Share groups (KIP-932) in the group coordinator, without sockets: a real replica manager over
real logs leads `__consumer_offsets`, ShareGroupHeartbeat goes straight to `GroupCoordinator.share`,
time is trio's autojump clock. The group lives in its records: a new coordinator over the same
logs serves the same members, epochs and assignments."""

import uuid

import trio
from test_group_coordinator import coordinator, join

from coordinator.group import admin as group_admin
from coordinator.group.consumer_heartbeat import HeartbeatRequest
from coordinator.group.share_heartbeat import ShareHeartbeatRequest
from protocol.errors import ErrorCode as E

TOPIC_ID = uuid.UUID(int=88)


def _with_ids(coord):
    coord.metadata_cache.topic_ids["t"] = TOPIC_ID
    coord.metadata_cache.version += 1


def beat(member, epoch, topics=("t",), group="jobs"):
    return ShareHeartbeatRequest(group, member, epoch, None, topics if epoch == 0 else None, "c", "/127.0.0.1")


def parts(answer) -> set:
    return {p for ps in (answer.assignment or {}).values() for p in ps}


async def test_members_join_share_partitions_and_survive_a_new_coordinator(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        _with_ids(coord)
        a = await coord.share.share_group_heartbeat(beat("a", 0))
        assert (a.error_code, a.member_epoch, parts(a)) == (E.NONE, 1, {0, 1, 2, 3})
        assert a.heartbeat_interval_ms == 5000
        b = await coord.share.share_group_heartbeat(beat("b", 0))
        assert b.error_code == E.NONE and b.member_epoch == 2 and parts(b)
        listed = group_admin.list_groups(coord.manager, [], ["share"]).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            ("jobs", "share", "Stable", "share")
        ]
        described = group_admin.describe_share_group(coord.manager, "jobs", {TOPIC_ID: "t"})
        assert (described.group_epoch, described.assignor_name, len(described.members)) == (2, "simple", 2)
        assert described.members[0].assignment[0].topic_name == "t"
        before = {m: (x.member_epoch, x.assigned) for m, x in coord.manager.groups["jobs"].share.members.items()}
    async with coordinator(tmp_path) as coord:  # a new broker process over the same logs
        group = coord.manager.groups["jobs"].share
        assert {m: (x.member_epoch, x.assigned) for m, x in group.members.items()} == before
        assert group.group_epoch == 2 and group.assignment_epoch == 2


async def test_a_silent_member_is_removed_after_its_session_and_a_leaver_at_once(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        _with_ids(coord)
        await coord.share.share_group_heartbeat(beat("a", 0))
        b = await coord.share.share_group_heartbeat(beat("b", 0))
        epoch = b.member_epoch
        for _ in range(12):  # b heartbeats every 5 s; a falls silent
            answer = await coord.share.share_group_heartbeat(beat("b", epoch))
            assert answer.error_code == E.NONE
            epoch = answer.member_epoch
            await trio.sleep(5)
        group = coord.manager.groups["jobs"].share
        assert list(group.members) == ["b"] and group.members["b"].assigned == {TOPIC_ID: frozenset({0, 1, 2, 3})}
        gone = await coord.share.share_group_heartbeat(beat("a", 1))
        assert gone.error_code == E.UNKNOWN_MEMBER_ID
        left = await coord.share.share_group_heartbeat(beat("b", -1))
        assert (left.error_code, left.member_epoch) == (E.NONE, -1)
        assert group.state == "Empty" and await group_admin.delete_group(coord.manager, "jobs") == E.NONE
        assert "jobs" not in coord.manager.groups


async def test_a_group_id_names_one_type_of_group(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        _with_ids(coord)
        await coord.share.share_group_heartbeat(beat("a", 0))
        refused = await coord.join_group(join("jobs"))
        assert refused.error_code == E.GROUP_ID_NOT_FOUND
        consumer = HeartbeatRequest("jobs", "c", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",))
        answer = await coord.consumer.consumer_group_heartbeat(consumer)
        assert (answer.error_code, answer.error_message) == (
            E.GROUP_ID_NOT_FOUND,
            "Group jobs is not a consumer group.",
        )
        assert group_admin.describe_group(coord.manager, "jobs").error_code == E.GROUP_ID_NOT_FOUND
        classic = await coord.share.share_group_heartbeat(beat("x", 0, group="g"))  # no such group yet: created
        assert classic.error_code == E.NONE
        await coord.join_group(join("classic"))
        other = await coord.share.share_group_heartbeat(beat("x", 0, group="classic"))
        assert (other.error_code, other.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
        assert group_admin.describe_share_group(coord.manager, "classic", {}).error_code == E.GROUP_ID_NOT_FOUND
