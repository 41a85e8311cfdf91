"""The group coordinator (Kafka's classic consumer group protocol, ZooKeeper-mode 3.x).

- `group_metadata`: the pure state of one group (states, members, protocol vote, offsets);
- `records`: the `__consumer_offsets` record formats and the group -> partition mapping;
- `manager`: the log-backed store (load on leadership, append with acks=-1);
- `coordinator` + `offsets` + `admin`: the trio shell answering the group APIs;
- `config`: the broker keys it reads.
"""
