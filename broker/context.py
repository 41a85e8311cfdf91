"""What request handlers may use: the broker's state holders (no sockets, no bytes)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager


@dataclass
class BrokerContext:
    config: BrokerConfig
    cluster_id: str
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager

    @property
    def broker_id(self) -> int:
        return self.config.broker_id
