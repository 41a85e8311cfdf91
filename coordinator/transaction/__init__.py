"""The transaction coordinator (KIP-98), ZooKeeper-mode Kafka 3.x. So far its pure core:

- `transaction_metadata`: one transactional id's state and Kafka's transitions;
- `records`: the `__transaction_state` record formats and the id -> partition mapping.
"""
