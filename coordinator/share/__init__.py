"""KIP-932's share coordinator: the durable state of share-partitions in `__share_group_state`."""
