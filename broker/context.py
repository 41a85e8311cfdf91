"""What request handlers may use: the broker's state holders (no sockets, no bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.config import BrokerConfig
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from storage.topic_configs import TopicConfigs


@dataclass
class BrokerContext:
    config: BrokerConfig
    cluster_id: str
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    zk: Any = None  # broker.zk.ZkClient (auto topic creation)
    controller: Any = None  # controller.controller.KafkaController
    topic_configs: TopicConfigs = field(default_factory=TopicConfigs)  # /config/topics overrides
    producer_ids: Any = None  # broker.producer_ids.ProducerIdManager (InitProducerId)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
