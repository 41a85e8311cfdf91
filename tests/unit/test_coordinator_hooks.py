"""The hooks coordinators build on (Kafka's onLeadershipChange and coordinator appends): listeners
hear about every partition that changes role through LeaderAndIsr and StopReplica, and
a coordinator's append (`CoordinatorPartitionLog`, origin COORDINATOR) returns once the HW covers
the records. Pure: a replica
manager over real logs in a temp dir, requests decoded as the broker receives them."""

import pytest
import trio
from broker_helpers import decoded, follower_fetch, leader_and_isr, replica_manager

from broker.context import BrokerContext
from broker.coordinator_log import CoordinatorPartitionLog
from broker.handlers import HANDLERS
from protocol import record_batch as rb
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.types import FieldDict


class Recorder:
    def __init__(self):
        self.events = []

    def on_election(self, tp, leader_epoch):
        self.events.append(("elected", tp, leader_epoch))

    def on_resignation(self, tp, leader_epoch):
        self.events.append(("resigned", tp, leader_epoch))


@pytest.fixture
def ctx(tmp_path):
    with replica_manager(tmp_path) as rm:
        yield BrokerContext(
            rm.config, "cluster", rm.metadata_cache, rm, rm.topic_configs, leadership_listeners=(Recorder(), Recorder())
        )


async def serve(ctx, api_key, version, body):
    """Through the broker's own handler table, as the server would."""
    header = FieldDict(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="t")
    return await HANDLERS[api_key](ctx, Request(header, body))


async def test_listeners_hear_elections_and_resignations(ctx):
    await serve(
        ctx,
        ApiKey.LEADER_AND_ISR,
        7,
        leader_and_isr(
            {("__consumer_offsets", 0): (1, [1, 2], [1, 2]), ("__consumer_offsets", 1): (2, [2, 1], [2, 1])},
            leader_epoch=3,
        ),
    )
    for listener in ctx.leadership_listeners:
        assert listener.events == [
            ("elected", ("__consumer_offsets", 0), 3),
            ("resigned", ("__consumer_offsets", 1), 3),
        ]
        listener.events.clear()
    # a stale epoch changes nothing and tells nobody; a new epoch moves leadership away
    await serve(
        ctx, ApiKey.LEADER_AND_ISR, 7, leader_and_isr({("__consumer_offsets", 0): (1, [1, 2], [1, 2])}, leader_epoch=3)
    )
    await serve(
        ctx, ApiKey.LEADER_AND_ISR, 7, leader_and_isr({("__consumer_offsets", 0): (2, [2, 1], [1, 2])}, leader_epoch=4)
    )
    assert ctx.leadership_listeners[0].events == [("resigned", ("__consumer_offsets", 0), 4)]
    ctx.leadership_listeners[0].events.clear()
    stop = decoded(
        ApiKey.STOP_REPLICA,
        3,
        {
            "controller_id": 9,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "topic_states": [
                {
                    "topic_name": "__consumer_offsets",
                    "partition_states": [
                        {"partition_index": i, "leader_epoch": -1, "delete_partition": False} for i in (1, 9)
                    ],
                }
            ],
        },
    )
    await serve(ctx, ApiKey.STOP_REPLICA, 3, stop)
    assert ctx.leadership_listeners[0].events == [("resigned", ("__consumer_offsets", 1), None)]  # 9 was never here


async def test_a_coordinator_append_returns_once_replicated(ctx, autojump_clock):
    """The coordinators' append (origin COORDINATOR, acks=-1) through `CoordinatorPartitionLog`:
    it returns once the follower covers the records, and the append path's errors come back as
    codes (a partition led elsewhere, a follower that never fetches, an ISR below
    min.insync.replicas)."""
    rm = ctx.replica_manager
    writer = CoordinatorPartitionLog(rm)
    await rm.become_leader_or_follower(leader_and_isr({("__consumer_offsets", 0): (1, [1, 2], [1, 2])}), 7)
    await rm.become_leader_or_follower(leader_and_isr({("__consumer_offsets", 1): (2, [2, 1], [2, 1])}), 7)
    fetch_request = follower_fetch("__consumer_offsets", 0, 2)
    result = {}

    async def append():
        result["outcome"] = await writer.append(("__consumer_offsets", 0), rb.build_batch([(b"k", b"v")] * 2), 5000)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(append)
        await trio.sleep(1)
        assert "outcome" not in result  # waits for the follower
        await rm.fetch(fetch_request)
    assert result["outcome"] == (ErrorCode.NONE, 0, None)
    led_elsewhere = await writer.append(("__consumer_offsets", 1), rb.build_batch([(b"k", b"v")]), 5000)
    assert led_elsewhere.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    started = trio.current_time()  # the follower never fetches again
    timed_out = await writer.append(("__consumer_offsets", 0), rb.build_batch([(b"k", b"v")]), 2000)
    assert timed_out.error == ErrorCode.REQUEST_TIMED_OUT and trio.current_time() - started == pytest.approx(2.0)
    rm.partitions[("__consumer_offsets", 0)].prepare_isr_shrink([2])
    rm.partitions[("__consumer_offsets", 0)].commit_isr_update([1], 5)
    below_min_isr = await writer.append(("__consumer_offsets", 0), rb.build_batch([(b"k", b"v")]), 2000)
    assert below_min_isr.error == ErrorCode.NOT_ENOUGH_REPLICAS  # min.insync.replicas=2
