"""A real minikafka cluster for application tests: ZooKeeper and N broker processes on
127.0.0.1 (ephemeral ports) in a temporary directory, speaking Kafka's wire protocol to any client.

- In pytest: the `kafka_cluster`, `kafka_topic` and `admin` fixtures (`minikafka.testing.plugin`,
  registered through the package's `pytest11` entry point; docs/testing.md).
- Anywhere else: `with KafkaCluster(brokers=3) as cluster: ...`.
"""

from minikafka.testing.admin import Admin
from minikafka.testing.cluster import SECURITY_MODES, KafkaCluster

__all__ = ["SECURITY_MODES", "Admin", "KafkaCluster"]
