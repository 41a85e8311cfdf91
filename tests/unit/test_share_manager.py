"""The partition leader's share-partitions (`broker/share/share_manager.py`) over a real replica
manager and real logs, without sockets: ShareFetch acquires whole batches up to the HW, carries
acknowledgements, a closed session releases its member's records, the group's configs decide
where it starts and how long a lock lasts, and a resignation forgets the state."""

import uuid

import pytest
from broker_helpers import leader_and_isr, replica_manager

from broker.metadata_cache import PartitionState
from broker.share.share_manager import ShareConfig, SharePartitionManager
from broker.share.share_partition import ACCEPT
from coordinator.group.group_config import GroupConfigs
from protocol import record_batch as rb
from protocol.errors import ErrorCode as E
from storage.append_origin import AppendOrigin

TOPIC_ID = uuid.UUID(int=9)
BROKER = {"group.share.record.lock.duration.ms": 30000, "group.share.min.record.lock.duration.ms": 15000}
BROKER |= {"group.share.max.record.lock.duration.ms": 60000}


@pytest.fixture
async def setup(tmp_path):
    with replica_manager(tmp_path, min_insync_replicas=1) as rm:
        await rm.become_leader_or_follower(leader_and_isr({("t", 0): (1, [1], [1])}), 7)
        rm.metadata_cache.partitions.setdefault("t", {})[0] = PartitionState("t", 0, 1, 0, (1,), (1,))
        rm.metadata_cache.topic_ids["t"] = TOPIC_ID
        rm.metadata_cache.version += 1
        clock = [0.0]
        configs = GroupConfigs(BROKER)
        manager = SharePartitionManager(rm, rm.metadata_cache, ShareConfig(30000, 3, 100), lambda: clock[0], configs)
        yield rm, manager, configs, clock


async def produce(rm, *values):
    await rm.append_records_and_wait(
        {("t", 0): rb.build_batch([(None, v) for v in values])}, 1, 1000, AppendOrigin.CLIENT
    )


async def fetch(manager, member, epoch, acks=None, group="g"):
    result = await manager.share_fetch(
        group,
        member,
        epoch,
        max_wait_ms=0,
        max_bytes=1 << 20,
        max_records=100,
        topics={TOPIC_ID: {0: acks or []}},
        forgotten=[],
        may_read=lambda topic: True,
    )
    assert result.error_code == E.NONE, result
    return result.topics[TOPIC_ID][0]


async def test_a_member_acquires_acknowledges_and_a_closed_session_releases(setup):
    rm, manager, configs, clock = setup
    configs.set("g", {"share.auto.offset.reset": "earliest"})
    await produce(rm, b"a", b"b")
    got = await fetch(manager, "m1", 0)
    assert [tuple(r) for r in got.acquired] == [(0, 1, 1)]
    assert [r.value for r in rb.decode_records(got.records)] == [b"a", b"b"]
    await produce(rm, b"c")
    got = await fetch(manager, "m1", 1, acks=[(0, 0, [ACCEPT])])
    assert got.acknowledge_error_code == E.NONE and [tuple(r) for r in got.acquired] == [(2, 2, 1)]
    assert manager.partitions[("g", ("t", 0))].start_offset == 1
    closing = await manager.share_fetch(
        "g", "m1", -1, max_wait_ms=0, max_bytes=1, max_records=1, topics={}, forgotten=[], may_read=lambda t: True
    )
    assert closing.error_code == E.NONE
    again = await fetch(manager, "m2", 0)  # what m1 held (1 and 2) went back
    assert [tuple(r) for r in again.acquired] == [(1, 2, 2)]


async def test_latest_is_the_default_and_the_groups_lock_duration_applies(setup):
    rm, manager, configs, clock = setup
    await produce(rm, b"old")
    assert (await fetch(manager, "m", 0)).acquired == []  # latest: starts at the HW
    await produce(rm, b"new")
    configs.set("g", {"share.record.lock.duration.ms": "20000"})
    assert [tuple(r) for r in (await fetch(manager, "m", 1)).acquired] == [(1, 1, 1)]
    clock[0] = 19_999.0
    assert (await fetch(manager, "other", 0)).acquired == []
    clock[0] = 20_000.0  # the group's 20 s, not the broker's 30 s
    assert [tuple(r) for r in (await fetch(manager, "other", 1)).acquired] == [(1, 1, 2)]


async def test_a_resignation_forgets_the_share_state(setup):
    rm, manager, configs, clock = setup
    configs.set("g", {"share.auto.offset.reset": "earliest"})
    await produce(rm, b"a")
    await fetch(manager, "m", 0)
    manager.on_resignation(("t", 0), 1)
    assert not manager.partitions
    assert [tuple(r) for r in (await fetch(manager, "m", 1)).acquired] == [(0, 0, 1)]  # anew, at earliest


async def test_session_errors_and_unknown_topics_answer_kafkas_codes(setup):
    rm, manager, configs, clock = setup
    stale = await manager.share_fetch(
        "g", "m", 5, max_wait_ms=0, max_bytes=1, max_records=1, topics={}, forgotten=[], may_read=lambda t: True
    )
    assert stale.error_code == E.SHARE_SESSION_NOT_FOUND
    unknown = await manager.share_fetch(
        "g",
        "m",
        0,
        max_wait_ms=0,
        max_bytes=1,
        max_records=1,
        topics={uuid.UUID(int=404): {0: []}},
        forgotten=[],
        may_read=lambda t: True,
    )
    assert unknown.topics[uuid.UUID(int=404)][0].error_code == E.UNKNOWN_TOPIC_ID
    acked = await manager.share_acknowledge("g", "m", 1, {TOPIC_ID: {0: [(0, 0, [ACCEPT])]}}, lambda t: True)
    assert acked.topics[TOPIC_ID][0].error_code == E.INVALID_RECORD_STATE  # nothing was acquired


async def test_a_closed_connection_ends_its_share_session_and_releases_the_members_records(setup):
    rm, manager, configs, clock = setup
    configs.set("g", {"share.auto.offset.reset": "earliest"})
    await produce(rm, b"a", b"b")
    result = await manager.share_fetch(
        "g",
        "m1",
        0,
        max_wait_ms=0,
        max_bytes=1 << 20,
        max_records=100,
        topics={TOPIC_ID: {0: []}},
        forgotten=[],
        may_read=lambda topic: True,
        connection_id="c1",
    )
    assert [tuple(r) for r in result.topics[TOPIC_ID][0].acquired] == [(0, 1, 1)]
    assert (await fetch(manager, "m2", 0)).acquired == []  # held by m1 for 30 s
    manager.on_disconnect("c2")  # another connection: nothing happens
    assert (await fetch(manager, "m2", 1)).acquired == []
    manager.on_disconnect("c1")  # m1's connection closed: its session ends, its records go back now
    assert ("g", "m1") not in manager.sessions.sessions
    assert [tuple(r) for r in (await fetch(manager, "m2", 2)).acquired] == [(0, 1, 2)]
