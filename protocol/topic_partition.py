"""The names of a partition, one home for each (Kafka's `TopicPartition` and `TopicIdPartition`).

`TopicPartition`: (topic name, partition index), the key of every per-partition map in the broker,
storage, controller, coordinators and client. `TopicIdPartition`: (topic id, partition index), the
key the KIP-848 assignors work in, since ConsumerGroupHeartbeat names topics by id.
"""

from __future__ import annotations

import uuid

TopicPartition = tuple[str, int]
TopicIdPartition = tuple[uuid.UUID, int]
