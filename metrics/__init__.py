"""Broker metrics for Prometheus (KIP-less: Kafka exposes them through JMX; we serve them under the
names the Prometheus JMX exporter's Kafka rules give them). `stats.py` holds the counters the
broker updates (pure, no I/O), `collector.py` turns them and the broker's state into metric
families at scrape time, and `http.py` serves `/metrics` from a trio task."""
