"""ZooKeeper for the broker and the controller: `zk.client` (the one module that imports kazoo,
bridged into trio) and `zk.znodes` (Kafka's ZooKeeper layout and JSON)."""
