"""The PySpark data source for minikafka: `spark.dataSource.register(MinikafkaDataSource)`."""
