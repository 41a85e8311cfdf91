"""What request handlers may use: the broker's state holders (no sockets, no bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker.config import BrokerConfig
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager


@dataclass
class BrokerContext:
    config: BrokerConfig
    cluster_id: str
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    zk: Any = None                 # broker.zk.ZkClient (auto topic creation)
    controller: Any = None         # controller.controller.KafkaController
    topic_configs: dict = field(default_factory=dict)   # topic -> {key: value} from /config/topics
    producer_ids: Any = None       # broker.producer_ids.ProducerIdManager (InitProducerId)

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
