"""Topic deletion (Kafka `TopicDeletionManager`, simplified), run by the active controller.

A deletion is asked for by DeleteTopics (the controller writes /admin/delete_topics/<topic>) or
by an admin tool writing that znode directly. Every live replica of the topic gets StopReplica
with delete, every live broker UpdateMetadata with the LeaderDuringDelete marker, the partitions
go Offline then NonExistent, and the topic's znodes (/brokers/topics/<topic>,
/config/topics/<topic>, /admin/delete_topics/<topic>) are removed. Unlike Kafka, deletion does not
wait for replicas on brokers that are down: their files stay until removed by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from controller.channel import RequestBatch
from controller.context import ControllerContext
from controller.partition_state_machine import NON_EXISTENT, OFFLINE, set_state
from protocol.errors import ErrorCode
from storage.topic_configs import TopicConfigs
from zk import znodes
from zk.client import NodeExistsError, NoNodeError, ZkClient
from zk.znodes import LeaderIsr

log = logging.getLogger(__name__)

#: the leader epoch a StopReplica carries for a partition being deleted (Kafka's EpochDuringDelete)
EPOCH_DURING_DELETE = -2


class TopicDeletionManager:
    """Deletes topics for one controller epoch; `send_batch` sends the queued requests."""

    def __init__(
        self,
        zk: ZkClient,
        ctx: ControllerContext,
        batch: RequestBatch,
        topic_configs: TopicConfigs,
        send_batch: Callable[[], None],
    ):
        self.zk = zk
        self.ctx = ctx
        self.batch = batch
        self.topic_configs = topic_configs
        self.send_batch = send_batch

    async def delete_topics(self, names: list[str]) -> list[tuple[str, ErrorCode]]:
        """DeleteTopics: [(name, error code)]; UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist."""
        results = []
        for name in names:
            if name not in self.ctx.assignments:
                results.append((name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                await self.zk.create(f"{znodes.DELETE_TOPICS}/{name}", b"", makepath=True)
            except NodeExistsError:
                pass
            await self.delete_topic(name)
            results.append((name, ErrorCode.NONE))
        return results

    async def on_notification(self, children: list[str]) -> None:
        """/admin/delete_topics children: delete each named topic; drop the request for one that
        does not exist."""
        for name in children:
            if name in self.ctx.assignments:
                await self.delete_topic(name)
            else:
                await self.zk.delete(f"{znodes.DELETE_TOPICS}/{name}", recursive=True)

    async def delete_topic(self, name: str) -> None:
        live = self.ctx.live_ids
        for tp in self.ctx.partitions_of(name):
            state = self.ctx.leadership.get(tp)
            self.batch.add_stop_replica(
                [r for r in self.ctx.replicas(tp) if r in live], tp, delete=True, leader_epoch=EPOCH_DURING_DELETE
            )
            self.batch.add_update_metadata(
                live, tp, state or LeaderIsr(-1, 0, (), self.ctx.epoch), self.ctx.replicas(tp), live, deleting=True
            )
        self.send_batch()
        for tp in self.ctx.partitions_of(name):
            set_state(self.ctx, tp, OFFLINE)
            set_state(self.ctx, tp, NON_EXISTENT)
        self.ctx.remove_topic(name)
        self.topic_configs.remove(name)
        for path in (znodes.topic_path(name), f"{znodes.CONFIG_TOPICS}/{name}", f"{znodes.DELETE_TOPICS}/{name}"):
            try:
                await self.zk.delete(path, recursive=True)
            except NoNodeError:
                pass
        log.info("controller: deleted topic %s", name)
