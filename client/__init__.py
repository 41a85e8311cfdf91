"""The trio Kafka client core used by everything in minikafka that talks to a broker: the
controller, follower fetchers, the CLI and the PySpark source."""

from client.cluster import Cluster, KafkaError
from client.connection import Connection, ConnectionClosed

__all__ = ["Cluster", "Connection", "ConnectionClosed", "KafkaError"]
