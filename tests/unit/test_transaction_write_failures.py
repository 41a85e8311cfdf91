"""Every write of the transaction coordinator meets a failed append (issue 45): NOT_ENOUGH_REPLICAS,
a timeout and a lost leadership of its `__transaction_state` partition. The answer carries
Kafka's error, the transactional id is as last committed (a first InitProducerId leaves no id
behind), and the id works on the next request once the partition heals.

No process: a real replica manager over real logs leads `__transaction_state`, and the failures
are real states of that partition set by LeaderAndIsr. The markers' sender is the one stand-in
(it records the markers asked for: writing them is not the coordinator's write path). Time is
trio's autojump clock."""

import contextlib
import itertools

import pytest
import trio
from broker_helpers import component_config, replica_manager
from coordinator_partition import FAILURES, CoordinatorPartition

from broker.coordinator_log import CoordinatorPartitionLog
from coordinator.transaction.config import TransactionConfig
from coordinator.transaction.coordinator import TransactionCoordinator
from coordinator.transaction.transaction_metadata import TxnState
from protocol.errors import ErrorCode as E

TXN = "__transaction_state"


class Markers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, bool]] = []

    async def write(self, producer_id, producer_epoch, coordinator_epoch, commit, partitions, still_current) -> None:
        self.sent.append((producer_id, producer_epoch, commit))


@contextlib.asynccontextmanager
async def served(tmp_path):
    with replica_manager(tmp_path, min_insync_replicas=1) as rm:
        ids = itertools.count(1000)

        async def next_id():
            return next(ids)

        coord = TransactionCoordinator(
            CoordinatorPartitionLog(rm),
            component_config(TransactionConfig, num_partitions=1),
            Markers(),
            next_id,
            wall_clock_ms=lambda: 1_700_000_000_000,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(coord.run)
            partition = CoordinatorPartition(rm, coord, TXN, 0)
            await partition.heal()
            yield coord, partition
            nursery.cancel_scope.cancel()


#: whether a failed write's record stays in this broker's log and is committed when the partition
#: heals: a timed-out append (the ISR shrinks to this broker) and one overtaken by a lost leadership
#: (this broker leads again with its log): the reload on the new leader epoch replays it then
REPLAYED_LATER = {"not-enough-replicas": False, "timeout": True, "lost-leadership": True}


@pytest.mark.parametrize("mode", FAILURES)
async def test_init_producer_id(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        error, _, _ = await partition.failing(mode, lambda: coord.init_producer_id("new", 60000))
        assert error == FAILURES[mode]
        if mode != "lost-leadership":
            assert "new" not in coord.manager.transactions  # a first InitProducerId leaves nothing
        await partition.heal()
        error, pid, epoch = await coord.init_producer_id("known", 60000)
        assert error == E.NONE and epoch == 0
        error, _, _ = await partition.failing(mode, lambda: coord.init_producer_id("known", 60000))
        assert error == FAILURES[mode]
        if mode != "lost-leadership":  # the epoch bump is not applied
            metadata = coord.manager.transactions["known"]
            assert (metadata.producer_id, metadata.producer_epoch, metadata.pending) == (pid, 0, None)
        await partition.heal()
        bumped = 2 if REPLAYED_LATER[mode] else 1
        assert await coord.init_producer_id("known", 60000) == (E.NONE, pid, bumped)


@pytest.mark.parametrize("mode", FAILURES)
async def test_add_partitions_and_end_txn(tmp_path, autojump_clock, mode):
    async with served(tmp_path) as (coord, partition):
        _, pid, epoch = await coord.init_producer_id("t1", 60000)
        answer = await partition.failing(mode, lambda: coord.add_partitions("t1", pid, epoch, {("orders", 0)}))
        assert answer == FAILURES[mode]
        if mode != "lost-leadership":
            metadata = coord.manager.transactions["t1"]
            assert metadata.state is TxnState.EMPTY and not metadata.partitions and metadata.pending is None
        await partition.heal()
        assert await coord.add_partitions("t1", pid, epoch, {("orders", 0)}) == E.NONE
        answer = await partition.failing(mode, lambda: coord.end_txn("t1", pid, epoch, True))
        assert answer == FAILURES[mode]
        if mode != "lost-leadership":
            assert coord.manager.transactions["t1"].state is TxnState.ONGOING
            assert coord.markers.sent == []
        await partition.heal()
        if coord.manager.transactions["t1"].state is TxnState.ONGOING:
            assert await coord.end_txn("t1", pid, epoch, True) == E.NONE
        await trio.sleep(1)
        assert coord.manager.transactions["t1"].state is TxnState.COMPLETE_COMMIT
        assert coord.markers.sent[-1] == (pid, epoch, True)
