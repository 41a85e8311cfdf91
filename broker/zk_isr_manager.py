"""ISR changes a partition leader writes to ZooKeeper (Kafka's `ZkIsrManager`, ZooKeeper mode's
AlterPartition): the new LeaderAndIsr state to `/brokers/topics/<topic>/partitions/<n>/state`,
conditional on the partition's zkVersion, then a notification under
`/isr_change_notification` for the controller. One write at a time, so a partition never has
two in flight.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import trio

from broker.partition import Partition
from metrics.stats import ReplicaStats
from protocol.topic_partition import TopicPartition
from zk import znodes
from zk.client import ZkClient

log = logging.getLogger(__name__)


class ZkIsrManager:
    def __init__(
        self,
        zk: ZkClient | None,
        partitions: dict[TopicPartition, Partition],
        replica_stats: ReplicaStats,
        partition_changed: Callable[[TopicPartition], None],
    ) -> None:
        """`partitions`: the replica manager's hosted partitions (a write for one no longer
        hosted is dropped); `partition_changed(tp)`: called once a new ISR is committed (delayed
        operations on the partition re-check). `zk` None: no ISR ever changes (unit tests)."""
        self.zk = zk
        self._partitions = partitions
        self._stats = replica_stats
        self._partition_changed = partition_changed
        self._lock = trio.Lock()

    async def write(self, partition: Partition, new_isr: list[int]) -> bool:
        """Write the ISR the partition prepared (`prepare_isr_shrink` / `prepare_isr_expand`) to
        its partition state znode, conditionally on its zkVersion, commit it in the partition, then
        notify the controller through /isr_change_notification. A lost race means this broker's
        view is stale: the partition stops changing its ISR until the controller's next
        LeaderAndIsr. A LeaderAndIsr that arrives during the write wins over it."""
        async with self._lock:
            if self.zk is None or self._partitions.get(partition.tp) is not partition or not partition.is_leader:
                return False
            leader_epoch, pending = partition.leader_epoch, partition.isr_state
            state = znodes.LeaderIsr(
                partition.local_broker_id,
                leader_epoch,
                tuple(new_isr),
                partition.controller_epoch,
                partition.partition_epoch,
            )
            try:
                stat = await self.zk.set(
                    znodes.partition_state_path(*partition.tp), state.encode(), version=partition.partition_epoch
                )
            except Exception as e:
                if partition.isr_state is pending:
                    partition.fail_isr_update()
                log.warning(
                    "ISR update of %s failed (%s): leaving it to the controller", partition.tp, type(e).__name__
                )
                return False
            if partition.leader_epoch != leader_epoch or partition.isr_state is not pending:
                log.info("ISR update of %s overtaken by a LeaderAndIsr; keeping the controller's state", partition.tp)
                return False
            before = len(partition.isr)
            partition.commit_isr_update(new_isr, stat.version)
            if len(new_isr) < before:
                self._stats.isr_shrinks += 1
            elif len(new_isr) > before:
                self._stats.isr_expands += 1
            self._partition_changed(partition.tp)
            try:
                await self.zk.create(
                    f"{znodes.ISR_CHANGE_NOTIFICATION}/isr_change_",
                    znodes.encode_partitions([partition.tp]),
                    sequence=True,
                    makepath=True,
                )
            except Exception as e:
                log.warning("ISR change notification for %s failed: %s", partition.tp, e)
            return True
