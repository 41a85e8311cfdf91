"""What a producer is told when a partition leader cannot verify its transaction (KIP-890 part 1;
Kafka's ReplicaManager.appendRecords verification callback, 3.9+): the coordinator's retriable
answers and a lost coordinator become NOT_ENOUGH_REPLICAS, which every producer retries."""

import socket

import pytest
import trio

from broker.metadata_cache import BrokerEndpoint
from broker.txn_verification import AddPartitionsToTxnManager, producer_error
from protocol.errors import ErrorCode


@pytest.mark.parametrize(
    "answer, told",
    [
        (ErrorCode.NETWORK_EXCEPTION, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_a_coordinators_answer_becomes_the_producers_error(answer, told):
    assert producer_error(answer) == told


class _Cache:
    """The one metadata question the manager asks: where the coordinator is."""

    def __init__(self, port: int):
        self.port = port

    def leader_broker(self, topic, partition):
        return BrokerEndpoint(2, "127.0.0.1", self.port)


async def test_a_coordinator_that_cannot_be_reached_is_retriable_for_the_producer():
    with socket.socket() as s:  # a port nobody listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manager = AddPartitionsToTxnManager(1, _Cache(port), lambda tid: 0, None, "test")
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        with trio.fail_after(10):
            errors = await manager.verify("t-id", 7, 0, [("t", 0), ("t", 1)])
        nursery.cancel_scope.cancel()
    assert errors == {("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS, ("t", 1): ErrorCode.NOT_ENOUGH_REPLICAS}
