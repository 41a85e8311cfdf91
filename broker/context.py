"""What request handlers may use: the broker's state holders (no sockets, no bytes).

Built once by the broker process (`broker.main.Broker`) and never changed after. `zk`,
`controller`, `producer_ids`, `group_coordinator` and `txn_coordinator` are None only in tests that serve a subset of the APIs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.acl_store import ZkAclStore
from broker.config import BrokerConfig
from broker.config_manager import DynamicConfigManager
from broker.control_plane import ControlPlaneGuard
from broker.dynamic_config import DynamicBrokerConfig
from broker.metadata_cache import MetadataCache
from broker.partition_metadata_client import PartitionMetadataClient
from broker.producer_ids import ProducerIdManager
from broker.quota.manager import QuotaManagers
from broker.replica_manager import LeadershipListener, ReplicaManager
from broker.share.share_manager import SharePartitionManager
from broker.txn_verification import AddPartitionsToTxnManager
from client_metrics.manager import ClientMetricsManager
from controller.controller import KafkaController
from coordinator.group.coordinator import GroupCoordinator
from coordinator.share.coordinator import ShareCoordinator
from coordinator.transaction.coordinator import TransactionCoordinator
from security.authorizer import Authorizer
from storage.topic_configs import TopicConfigs
from zk.client import ZkClient


@dataclass(frozen=True)
class BrokerContext:
    config: BrokerConfig
    cluster_id: str
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    topic_configs: TopicConfigs  # /config/topics overrides over the broker's defaults
    zk: ZkClient | None = None  # auto topic creation, topic configs on LeaderAndIsr
    controller: KafkaController | None = None  # CreateTopics, DeleteTopics, ... (when active)
    producer_ids: ProducerIdManager | None = None  # InitProducerId
    group_coordinator: GroupCoordinator | None = None  # the group APIs
    txn_coordinator: TransactionCoordinator | None = None  # the transaction APIs
    txn_verification: AddPartitionsToTxnManager | None = None  # KIP-890 checks before transactional appends
    leadership_listeners: tuple[LeadershipListener, ...] = ()  # coordinators: on_election / on_resignation
    dynamic_config: DynamicBrokerConfig | None = None  # DescribeConfigs / AlterConfigs of brokers
    config_manager: DynamicConfigManager | None = None  # applies config changes at once
    authorizer: Authorizer | None = None  # authorizer.class.name set: every API checks ACLs
    acl_store: ZkAclStore | None = None  # CreateAcls / DescribeAcls / DeleteAcls
    control_plane: ControlPlaneGuard = field(default_factory=ControlPlaneGuard)  # who may act as controller
    quotas: QuotaManagers = field(default_factory=QuotaManagers.create)  # client quotas (KIP-13/55/124/599)
    share_manager: SharePartitionManager | None = None  # ShareFetch / ShareAcknowledge (KIP-932)
    share_coordinator: ShareCoordinator | None = None  # the share-state APIs 83-87 (KIP-932)
    partition_metadata: PartitionMetadataClient | None = None  # latest offsets from leaders (KIP-1226 lag)
    client_metrics: ClientMetricsManager | None = None  # KIP-714's subscriptions and pushed metrics

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
