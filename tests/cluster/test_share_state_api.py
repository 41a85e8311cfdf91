"""The share coordinator's APIs (KIP-932, keys 83-87) on a real broker, over the wire: FindCoordinator
with key type 2 finds the coordinator of `group:topicId:partition` (creating `__share_group_state`),
and InitializeShareGroupState, WriteShareGroupState, ReadShareGroupState,
ReadShareGroupStateSummary and DeleteShareGroupState answer as Kafka's share coordinator does:
uninitialized reads answer start offset -1, writes merge, an older leader epoch is fenced. A key
of another shape is INVALID_REQUEST."""

import uuid

import pytest
import trio

from client.connection import Connection, ConnectionClosed
from coordinator.share.records import SharePartitionKey, coordinator_key
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow
BROKER = {
    "share_coordinator_state_topic_replication_factor": 1,
    "share_coordinator_state_topic_min_isr": 1,
    "share_coordinator_state_topic_num_partitions": 2,
}
TOPIC_ID = uuid.uuid4()


def batch(first, last, state, count):
    return {"first_offset": first, "last_offset": last, "delivery_state": state, "delivery_count": count}


async def ask(conn, api, partition: dict, version=0, group="g"):
    """One partition's answer (retried while the coordinator is not ready)."""
    body = {"group_id": group, "topics": [{"topic_id": TOPIC_ID, "partitions": [partition]}]}
    with trio.fail_after(30):
        while True:
            r = await conn.request(api, body, version=version)
            answer = r.results[0].partitions[0]
            if answer.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
                return answer
            await trio.sleep(0.2)


async def test_the_share_state_apis_over_the_wire(start_broker):
    broker = start_broker(1, **BROKER)
    async with Connection.open(broker.host, broker.port) as conn:
        key = coordinator_key(SharePartitionKey("g", TOPIC_ID, 0))
        with trio.fail_after(30):
            while True:
                found = await conn.request(
                    ApiKey.FIND_COORDINATOR, {"key_type": 2, "coordinator_keys": [key]}, version=4
                )
                if found.coordinators[0].error_code == ErrorCode.NONE:
                    break
                await trio.sleep(0.2)
        assert found.coordinators[0].node_id == 1
        bad = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": 2, "coordinator_keys": ["no-shape"]}, version=4)
        assert bad.coordinators[0].error_code == ErrorCode.INVALID_REQUEST

        read = await ask(conn, ApiKey.READ_SHARE_GROUP_STATE, {"partition": 0, "leader_epoch": 1})
        assert (read.error_code, read.start_offset, read.state_batches) == (ErrorCode.NONE, -1, [])
        written = await ask(
            conn,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            {
                "partition": 0,
                "state_epoch": 0,
                "leader_epoch": 1,
                "start_offset": 10,
                "delivery_complete_count": 1,
                "state_batches": [batch(10, 19, 0, 1), batch(12, 12, 2, 1)],
            },
            version=1,
        )
        assert written.error_code == ErrorCode.NONE
        read = await ask(conn, ApiKey.READ_SHARE_GROUP_STATE, {"partition": 0, "leader_epoch": 2})
        assert read.start_offset == 10
        got = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in read.state_batches]
        assert got == [(10, 11, 0, 1), (12, 12, 2, 1), (13, 19, 0, 1)]
        fenced = await ask(
            conn,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            {"partition": 0, "state_epoch": 0, "leader_epoch": 1, "start_offset": 11, "state_batches": []},
        )
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH  # leader epoch 2 read it since
        summary = await ask(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, {"partition": 0, "leader_epoch": 2}, version=1)
        assert (summary.start_offset, summary.leader_epoch, summary.delivery_complete_count) == (10, 2, 1)
        init = await ask(
            conn, ApiKey.INITIALIZE_SHARE_GROUP_STATE, {"partition": 0, "state_epoch": 1, "start_offset": 50}
        )
        assert init.error_code == ErrorCode.NONE
        summary = await ask(conn, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, {"partition": 0, "leader_epoch": 2}, version=1)
        assert (summary.state_epoch, summary.start_offset) == (1, 50)
        deleted = await ask(conn, ApiKey.DELETE_SHARE_GROUP_STATE, {"partition": 0})
        assert deleted.error_code == ErrorCode.NONE
        read = await ask(conn, ApiKey.READ_SHARE_GROUP_STATE, {"partition": 0, "leader_epoch": 3})
        assert read.start_offset == -1
        empty = await conn.request(
            ApiKey.READ_SHARE_GROUP_STATE,
            {"group_id": "", "topics": [{"topic_id": TOPIC_ID, "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        )
        assert empty.results[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST


SHARE_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}


async def test_apiversions_advertises_share_groups_and_share_version_unless_switched_off(start_broker):
    on = start_broker(1, **BROKER)
    async with Connection.open(on.host, on.port) as conn:
        r = await conn.request(
            ApiKey.API_VERSIONS, {"client_software_name": "t", "client_software_version": "1"}, version=3
        )
        assert SHARE_APIS <= {k.api_key for k in r.api_keys}
        assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [("share.version", 0, 1)]
        assert [(f.name, f.max_version_level) for f in r.finalized_features] == [("share.version", 1)]
    off = start_broker(2, **(BROKER | {"group.share.enable": "false"}))
    async with Connection.open(off.host, off.port) as conn:
        r = await conn.request(
            ApiKey.API_VERSIONS, {"client_software_name": "t", "client_software_version": "1"}, version=3
        )
        assert not SHARE_APIS & {k.api_key for k in r.api_keys}
        assert 18 in {k.api_key for k in r.api_keys} and r.finalized_features == []
        assert [f.name for f in r.supported_features] == ["share.version"]
        with (
            pytest.raises(ConnectionClosed),
            trio.fail_after(10),
        ):  # not advertised: the connection closes, as for any API
            await conn.request(
                ApiKey.SHARE_GROUP_HEARTBEAT,
                {"group_id": "g", "member_id": "m", "member_epoch": 0, "subscribed_topic_names": ["t"]},
                version=1,
            )
