"""minikafka's PySpark connector: the `minikafka` data source, a source and a sink with Spark's
Kafka schema and options. `spark.dataSource.register(MinikafkaDataSource)`."""

from spark_connector.datasource import MinikafkaDataSource

__all__ = ["MinikafkaDataSource"]
