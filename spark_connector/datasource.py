"""The `minikafka` data source for PySpark (Spark 4 Python Data Source API), both ways: reads as
Spark's Kafka source (`source.py`) and writes as Spark's Kafka sink (`sink.py`).

    spark.dataSource.register(MinikafkaDataSource)
    spark.read.format("minikafka") ... / df.write.format("minikafka") ...
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource

from spark_connector.sink import MinikafkaStreamWriter, MinikafkaWriter
from spark_connector.source import MinikafkaBatchReader, MinikafkaStreamReader, schema_for
from spark_connector.source_options import SourceOptions


class MinikafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "minikafka"

    def schema(self) -> str:
        return schema_for(self.options)

    def reader(self, schema):
        return MinikafkaBatchReader(SourceOptions(self.options))

    def streamReader(self, schema):
        return MinikafkaStreamReader(SourceOptions(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        return MinikafkaWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        return MinikafkaStreamWriter(dict(self.options), schema, overwrite)
