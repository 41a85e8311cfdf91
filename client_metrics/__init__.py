"""KIP-714 client metrics: subscriptions (CLIENT_METRICS config resources), the client instances
that push, and their pushed OTLP metrics (Kafka's `ClientMetricsManager`)."""
