"""`minikafka perf`: Kafka-style perf drivers (produce, consume, end-to-end) on our own client
(`minikafka_cli.perf_tools.ours`) or on confluent-kafka (`minikafka_cli.perf_tools.confluent`), reporting `perf.stats.Result`s."""
