"""Options the minikafka Spark source and sink share, named as Spark's Kafka integration names
them: `kafka.bootstrap.servers` (or `bootstrap.servers`) and Kafka's client security keys with
Spark's `kafka.` prefix (`kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config`, `kafka.ssl.truststore.location`, ...), as for any Kafka client."""

from __future__ import annotations


def bootstrap_of(options: dict) -> str:
    """The bootstrap servers; raises ValueError naming the option when it is missing."""
    bootstrap = options.get("bootstrap.servers") or options.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("option kafka.bootstrap.servers (or bootstrap.servers) is required")
    return bootstrap


def security_of(options: dict) -> dict | None:
    """Kafka's client security keys without Spark's `kafka.` prefix, or None when there are none."""
    return {
        k[len("kafka.") :]: v
        for k, v in options.items()
        if k.startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl."))
    } or None
