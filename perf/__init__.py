"""`minikafka perf`: Kafka-style perf drivers (produce, consume, end-to-end) on our own client
(`perf.ours`) or on confluent-kafka (`perf.confluent`), reporting `perf.stats.Result`s."""
