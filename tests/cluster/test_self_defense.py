"""A broker that defends itself (issue 34): requests that would make it allocate or compute out
of proportion to their size are refused with Kafka's error codes before anything is built, and
the broker keeps answering everyone else meanwhile. Real broker, real ZooKeeper, raw requests."""

from __future__ import annotations

import pytest
import trio
from admin_helpers import raw, wait

from client.connection import Connection
from controller.topics import MAX_PARTITIONS_PER_REQUEST
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

HUGE = 2**31 - 1

#: a probe's longest wait that means the broker stalled: the quadratic or unbounded work these
#: tests guard against held it for minutes, while a loaded 2-core run has shown 1.3 s for the
#: linear work (the speed targets are in make bench)
STALLED_S = 5.0


def controller_ready(broker) -> None:
    """Until the broker's controller serves CreateTopics (its metadata may name the controller,
    from the /controller watch, before the failover is done and NOT_CONTROLLER stops)."""
    probe = {"topics": [topic("probe", 1)], "timeout_ms": 5000, "validate_only": True}
    wait(lambda: raw(broker, ApiKey.CREATE_TOPICS, probe).topics[0].error_code == ErrorCode.NONE, "the controller", 30)


def topic(name: str, partitions: int, rf: int = 1) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf, "configs": []}


async def _while_probing(broker, api_key, body, version=None):
    """Send one request while another connection sends ApiVersions back to back; returns the
    response, the slowest ApiVersions round trip (s) seen until the response came, and the
    request's whole time (s)."""
    slowest = 0.0
    started_all = trio.current_time()
    async with Connection.open(broker.host, broker.port) as probe, Connection.open(broker.host, broker.port) as conn:
        done = trio.Event()
        response = None

        async def ask():
            nonlocal response
            response = await conn.request(api_key, body, version=version, timeout_s=60)
            done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            while not done.is_set():
                started = trio.current_time()
                await probe.request(ApiKey.API_VERSIONS, {}, version=0, timeout_s=60)
                slowest = max(slowest, trio.current_time() - started)
                await trio.sleep(0.005)
    return response, slowest, trio.current_time() - started_all


def test_create_topics_and_partitions_asking_for_2_31_partitions_are_refused_at_once(start_broker):
    """CreateTopics with num_partitions 2^31-1 (validate_only or not) used to build the whole
    assignment inside the controller's loop: the broker froze, lost its ZooKeeper session and
    grew until the kernel killed it. Now POLICY_VIOLATION, and ApiVersions keeps being answered."""
    broker = start_broker(1)
    controller_ready(broker)
    for validate_only in (True, False):
        body = {"topics": [topic("huge", HUGE)], "timeout_ms": 10_000, "validate_only": validate_only}
        response, slowest, _ = trio.run(_while_probing, broker, ApiKey.CREATE_TOPICS, body)
        assert response.topics[0].error_code == ErrorCode.POLICY_VIOLATION, response
        assert "excessively large" in response.topics[0].error_message
        assert slowest < STALLED_S, slowest  # a frozen broker took minutes; the 100 ms target is in make bench
    # the bound is per request, over all its topics: two topics of 6,000 partitions each
    half = MAX_PARTITIONS_PER_REQUEST * 3 // 5
    body = {"topics": [topic("a", half), topic("b", half)], "timeout_ms": 10_000, "validate_only": True}
    response = raw(broker, ApiKey.CREATE_TOPICS, body)
    assert [t.error_code for t in response.topics] == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION]
    # a real topic grown to 2^31-1 partitions
    created = raw(broker, ApiKey.CREATE_TOPICS, {"topics": [topic("small", 1)], "timeout_ms": 10_000})
    assert created.topics[0].error_code == ErrorCode.NONE
    body = {"topics": [{"name": "small", "count": HUGE, "assignments": None}], "timeout_ms": 10_000}
    response, slowest, _ = trio.run(_while_probing, broker, ApiKey.CREATE_PARTITIONS, {**body, "validate_only": False})
    assert response.results[0].error_code == ErrorCode.POLICY_VIOLATION, response
    assert slowest < STALLED_S, slowest
    assert raw(broker, ApiKey.METADATA, {"topics": [{"name": "small"}]}).topics[0].partitions.__len__() == 1


def test_requests_with_many_names_are_checked_in_linear_time(start_broker):
    """Duplicate checks were quadratic in the number of names (config keys, DeleteTopics against
    the refused list, DescribeUserScramCredentials): 60,000 keys in one IncrementalAlterConfigs
    kept the broker busy for minutes. Now one pass, INVALID_REQUEST naming the duplicate."""
    broker = start_broker(1)
    controller_ready(broker)
    created = raw(broker, ApiKey.CREATE_TOPICS, {"topics": [topic("t", 1)], "timeout_ms": 10_000})
    assert created.topics[0].error_code == ErrorCode.NONE
    configs = [{"name": f"key.{i}", "config_operation": 0, "value": "1"} for i in range(60_000)]
    configs.append(configs[0])
    body = {"resources": [{"resource_type": 2, "resource_name": "t", "configs": configs}], "validate_only": True}
    response, slowest, _ = trio.run(_while_probing, broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
    assert response.responses[0].error_code == ErrorCode.INVALID_REQUEST, response
    assert "duplicate" in response.responses[0].error_message
    assert slowest < STALLED_S, slowest


def test_a_sync_group_assignment_too_large_to_store_answers_unknown_server_error(start_broker):
    """Kafka's storeGroup answers UNKNOWN_SERVER_ERROR when the group's record is too large (a
    60 MB assignment); INVALID_COMMIT_OFFSET_SIZE is for offset commits only."""
    from group_helpers import GROUP_BROKER

    broker = start_broker(1, **GROUP_BROKER)

    async def go():
        async with Connection.open(broker.host, broker.port) as conn:
            join = {
                "group_id": "big",
                "session_timeout_ms": 30000,
                "rebalance_timeout_ms": 30000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            }
            with trio.fail_after(60):
                while True:
                    joined = await conn.request(ApiKey.JOIN_GROUP, join, version=5)
                    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                        join["member_id"] = joined.member_id
                    elif joined.error_code == ErrorCode.NONE:
                        break
                    else:  # __consumer_offsets is created by the first FindCoordinator
                        await conn.request(ApiKey.FIND_COORDINATOR, {"key": "big", "key_type": 0}, version=3)
                        await trio.sleep(0.2)
            member = joined.member_id
            sync = {
                "group_id": "big",
                "generation_id": joined.generation_id,
                "member_id": member,
                "assignments": [{"member_id": member, "assignment": b"\x00" * (60 * 1024 * 1024)}],
            }
            return await conn.request(ApiKey.SYNC_GROUP, sync, version=3, timeout_s=60)

    synced = trio.run(go)
    assert synced.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, synced.error_code


def test_a_topic_of_thousands_of_partitions_is_made_in_steps_that_let_the_broker_answer(start_broker):
    """A legitimate large request (2,000 partitions on one broker) used to freeze the broker for
    seconds while LeaderAndIsr created every log in one go; it now runs in bounded steps
    (ApiVersions keeps being answered). Judged by the share of the request's time the broker
    could not answer, not by a wall-clock bound a loaded run can miss: in one go the longest
    ApiVersions wait was 75% of the request's time (2.1 of 2.8 s idle), in steps it is 3%
    (76 ms of 2.7 s idle; 1.14 s once in a loaded make test)."""
    # Kafka's 18 s ZooKeeper session, not the tests' 3 s: making 2,000 logs under a loaded suite
    # once starved the session's pings, the broker's registration lapsed and CreateTopics saw no broker
    broker = start_broker(1, zookeeper_session_timeout_ms=18000)
    controller_ready(broker)
    body = {"topics": [topic("wide", 2000)], "timeout_ms": 60_000}
    response, slowest, elapsed = trio.run(_while_probing, broker, ApiKey.CREATE_TOPICS, body)
    assert response.topics[0].error_code == ErrorCode.NONE
    assert slowest < 0.25 * elapsed, (slowest, elapsed)
