"""The coordinators' topics and the settings they are created with. Whichever request makes one
(FindCoordinator, Metadata with auto-creation, CreateTopics naming it), the topic gets its
coordinator's settings, never a plain topic's, as Kafka's `AutoTopicCreationManager.creatableTopic`
and `KafkaApis.getOrCreateInternalTopic` give them:

- `__consumer_offsets`: `offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`,
  `cleanup.policy=compact`, `compression.type=producer`, `segment.bytes=offsets.topic.segment.bytes`
  (Kafka's `GroupCoordinator.groupMetadataTopicConfigs`);
- `__transaction_state`: `transaction.state.log.num.partitions`, `transaction.state.log.replication.factor`,
  `cleanup.policy=compact`, `compression.type=uncompressed`, `min.insync.replicas=transaction.state.log.min.isr`,
  `segment.bytes=transaction.state.log.segment.bytes`, `unclean.leader.election.enable=false`
  (Kafka's `TransactionStateManager.transactionTopicConfigs`);
- `__share_group_state`: `share.coordinator.state.topic.num.partitions`,
  `share.coordinator.state.topic.replication.factor`, `cleanup.policy=delete`, `retention.ms=-1`,
  `min.insync.replicas=share.coordinator.state.topic.min.isr`, `segment.bytes=share.coordinator.state.topic.segment.bytes`
  (Kafka's `ShareCoordinatorService.shareGroupStateTopicConfigs`: its snapshots, not compaction,
  bound what a load replays; this broker keeps the whole log until retention).

Only the coordinators write these topics: `ReplicaManager` refuses a client's append to one
(INVALID_TOPIC_EXCEPTION, "Cannot append to internal topic ...")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.topic_names import GROUP_METADATA_TOPIC, SHARE_GROUP_STATE_TOPIC, TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from broker.context import BrokerContext


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """How a coordinator's topic is created: its partition count, replication factor and topic configs."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]


def internal_topic_spec(ctx: BrokerContext, name: str) -> InternalTopicSpec | None:
    """The settings of internal topic `name` from this broker's coordinator configs; None for a
    plain topic, or when this broker runs no coordinator for it (unit tests)."""
    if name == GROUP_METADATA_TOPIC and ctx.group_coordinator is not None:
        group = ctx.group_coordinator.config
        return InternalTopicSpec(
            name,
            group.offsets_topic_num_partitions,
            group.offsets_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(group.offsets_topic_segment_bytes),
            },
        )
    if name == TRANSACTION_STATE_TOPIC and ctx.txn_coordinator is not None:
        txn = ctx.txn_coordinator.config
        return InternalTopicSpec(
            name,
            txn.num_partitions,
            txn.replication_factor,
            {
                "cleanup.policy": "compact",
                "compression.type": "uncompressed",
                "min.insync.replicas": str(txn.min_isr),
                "segment.bytes": str(txn.segment_bytes),
                "unclean.leader.election.enable": "false",
            },
        )
    if name == SHARE_GROUP_STATE_TOPIC and ctx.share_coordinator is not None:
        share = ctx.share_coordinator.config
        return InternalTopicSpec(
            name,
            share.num_partitions,
            share.replication_factor,
            {
                "cleanup.policy": "delete",
                "retention.ms": "-1",  # an idle share-partition's snapshot must outlive any retention
                "min.insync.replicas": str(share.min_isr),
                "segment.bytes": str(share.segment_bytes),
            },
        )
    return None
