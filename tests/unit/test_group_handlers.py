"""Every version of every group API through the broker's own handler table, without sockets:
requests are encoded and decoded as a client would send them, responses encoded and decoded as a
client would read them (so each version's fields and nullability are right), against a real
group coordinator over real logs."""

import pytest
import trio
from test_group_coordinator import coordinator

from broker.context import BrokerContext
from broker.handlers import HANDLERS
from protocol import consumer_protocol as cp
from protocol.api import SCHEMAS, decode_request, decode_response, encode_request, encode_response
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode as E
from protocol.framing import FrameDecoder
from protocol.schemas import APIS
from protocol.types import Array, KStruct


def fit(struct, body):
    """`body` without the fields `struct` (one version's request shape) lacks, as a client that
    speaks that version sends it."""
    if not isinstance(body, dict):
        return body
    subs = {name: sub for name, sub, _ in struct.fields}
    out = {}
    for name, value in body.items():
        sub = subs.get(name)
        if sub is None:
            continue
        if isinstance(sub, Array) and isinstance(sub.subcon, KStruct) and value is not None:
            value = [fit(sub.subcon, v) for v in value]
        out[name] = value
    return out


async def call(ctx, key, version, body):
    body = fit(APIS[key].REQUEST[version], body)
    (frame,) = FrameDecoder().feed(encode_request(key, version, 7, body, client_id="judge"))
    request = decode_request(frame)
    request.peer = "127.0.0.1:5555"
    response = await HANDLERS[key](ctx, request)
    (out,) = FrameDecoder().feed(encode_response(key, version, 7, response))
    return decode_response(key, version, out)[1]


def context(coord):
    rm = coord.runtime.partition_log.replica_manager
    return BrokerContext(rm.config, "c", rm.metadata_cache, rm, rm.topic_configs, group_coordinator=coord)


def versions(key):
    return range(SCHEMAS[key].min_version, SCHEMAS[key].max_version + 1)


SUB = cp.encode_subscription(["t"])


async def join_and_sync(ctx, group, join_version, sync_version):
    body = {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }
    r = await call(ctx, ApiKey.JOIN_GROUP, join_version, body)
    if join_version >= 4:
        assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
        body["member_id"] = r.member_id
        r = await call(ctx, ApiKey.JOIN_GROUP, join_version, body)
    assert r.error_code == E.NONE and r.leader == r.member_id and r.protocol_name == "range"
    assert [bytes(m.metadata) for m in r.members] == [SUB]
    me, generation = r.member_id, r.generation_id
    s = await call(
        ctx,
        ApiKey.SYNC_GROUP,
        sync_version,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": me,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": me, "assignment": b"A"}],
        },
    )
    assert s.error_code == E.NONE and bytes(s.assignment) == b"A"
    return me, generation


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
async def test_join_sync_heartbeat_leave_every_version(tmp_path, autojump_clock, version):
    async with coordinator(tmp_path) as coord:
        ctx = context(coord)
        sync_version = min(version, SCHEMAS[ApiKey.SYNC_GROUP].max_version)
        me, generation = await join_and_sync(ctx, "g", version, sync_version)
        hb_version = min(version, SCHEMAS[ApiKey.HEARTBEAT].max_version)
        hb = await call(
            ctx, ApiKey.HEARTBEAT, hb_version, {"group_id": "g", "generation_id": generation, "member_id": me}
        )
        assert hb.error_code == E.NONE
        described = await call(ctx, ApiKey.DESCRIBE_GROUPS, min(version, 5), {"groups": ["g"]})
        (group,) = described.groups
        assert group.group_state == "Stable" and group.members[0].client_id == "judge"
        assert group.members[0].client_host == "/127.0.0.1"
        leave_version = min(version, SCHEMAS[ApiKey.LEAVE_GROUP].max_version)
        body = (
            {"group_id": "g", "members": [{"member_id": me}]}
            if leave_version >= 3
            else {"group_id": "g", "member_id": me}
        )
        left = await call(ctx, ApiKey.LEAVE_GROUP, leave_version, body)
        assert left.error_code == E.NONE
        if leave_version >= 3:
            assert [m.error_code for m in left.members] == [E.NONE]
        await trio.sleep(0.1)
        assert coord.manager.groups["g"].state.value == "Empty"


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
async def test_offset_commit_and_fetch_every_version(tmp_path, autojump_clock, version):
    async with coordinator(tmp_path) as coord:
        ctx = context(coord)
        partitions = [
            {"partition_index": 0, "committed_offset": 11, "committed_leader_epoch": 3, "committed_metadata": "m"},
            {"partition_index": 9, "committed_offset": 1},
        ]
        body = {
            "group_id": "simple",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time_ms": -1,
            "topics": [
                {"name": "t", "partitions": partitions},
                {"name": "missing", "partitions": [{"partition_index": 0}]},
            ],
        }
        r = await call(ctx, ApiKey.OFFSET_COMMIT, version, body)
        codes = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
        assert codes == {
            ("t", 0): E.NONE,
            ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
            ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        }
        fetch_version = min(version, SCHEMAS[ApiKey.OFFSET_FETCH].max_version)
        wanted = [{"name": "t", "partition_indexes": [0, 1]}]
        if fetch_version >= 8:
            f = await call(
                ctx, ApiKey.OFFSET_FETCH, fetch_version, {"groups": [{"group_id": "simple", "topics": wanted}]}
            )
            (group,) = f.groups
            assert group.error_code == E.NONE
            topics = group.topics
        else:
            f = await call(ctx, ApiKey.OFFSET_FETCH, fetch_version, {"group_id": "simple", "topics": wanted})
            topics = f.topics
        found = {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in topics for p in t.partitions}
        assert found == {("t", 0): (11, "m"), ("t", 1): (-1, "")}
        if fetch_version >= 5:
            epochs = {p.partition_index: p.committed_leader_epoch for t in topics for p in t.partitions}
            assert epochs == {0: 3 if version >= 6 else -1, 1: -1}


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
async def test_find_coordinator_every_version(tmp_path, autojump_clock, version):
    async with coordinator(tmp_path) as coord:
        ctx = context(coord)
        # __consumer_offsets is not in this broker's metadata cache: COORDINATOR_NOT_AVAILABLE
        body = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
        r = await call(ctx, ApiKey.FIND_COORDINATOR, version, body)
        if version >= 4:
            assert [(c.key, c.error_code) for c in r.coordinators] == [("g", E.COORDINATOR_NOT_AVAILABLE)] * 1 + [
                ("h", E.COORDINATOR_NOT_AVAILABLE)
            ]
        else:
            assert r.error_code == E.COORDINATOR_NOT_AVAILABLE


async def test_group_admin_apis_every_version(tmp_path, autojump_clock):
    async with coordinator(tmp_path) as coord:
        ctx = context(coord)
        await join_and_sync(ctx, "active", 9, 5)
        for version in versions(ApiKey.LIST_GROUPS):
            r = await call(ctx, ApiKey.LIST_GROUPS, version, {"states_filter": ["stable"], "types_filter": []})
            assert [g.group_id for g in r.groups] == ["active"]
        for version in versions(ApiKey.DELETE_GROUPS):
            r = await call(ctx, ApiKey.DELETE_GROUPS, version, {"groups_names": ["active", "nobody"]})
            assert [(x.group_id, x.error_code) for x in r.results] == [
                ("active", E.NON_EMPTY_GROUP),
                ("nobody", E.GROUP_ID_NOT_FOUND),
            ]
        r = await call(
            ctx,
            ApiKey.OFFSET_DELETE,
            0,
            {"group_id": "active", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
        )
        assert r.error_code == E.NONE and r.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC
        r = await call(ctx, ApiKey.OFFSET_DELETE, 0, {"group_id": "nobody", "topics": []})
        assert r.error_code == E.GROUP_ID_NOT_FOUND
