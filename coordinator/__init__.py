"""Kafka's coordinators: `group/` (consumer groups and committed offsets, `__consumer_offsets`)."""
