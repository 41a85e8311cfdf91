"""The metadata cache from UpdateMetadata bodies of old and new versions."""

from broker_helpers import decoded

from broker.metadata_cache import MetadataCache
from protocol.errors import ErrorCode


def test_update_v5_and_v8():
    """v5 is the first UpdateMetadata served (the first with a broker epoch, issue 34)."""
    cache = MetadataCache()
    cache.update(
        decoded(
            6,
            5,
            {
                "controller_id": 2,
                "controller_epoch": 1,
                "live_brokers": [
                    {"id": i, "endpoints": [{"host": h, "port": i, "listener": "PLAINTEXT", "security_protocol": 0}]}
                    for i, h in ((1, "a"), (2, "b"))
                ],
                "topic_states": [
                    {
                        "topic_name": "t",
                        "partition_states": [
                            {
                                "partition_index": 0,
                                "controller_epoch": 1,
                                "leader": 1,
                                "leader_epoch": 3,
                                "isr": [1, 2],
                                "replicas": [1, 2],
                            }
                        ],
                    }
                ],
            },
        )
    )
    assert cache.controller_id == 2 and cache.brokers[2].host == "b"
    md = cache.topic_metadata("t")
    assert md["partitions"][0]["leader_id"] == 1 and md["partitions"][0]["isr_nodes"] == [1, 2]
    cache.update(
        decoded(
            6,
            8,
            {
                "controller_id": 1,
                "controller_epoch": 2,
                "live_brokers": [
                    {"id": 2, "endpoints": [{"host": "b", "port": 2, "listener": "PLAINTEXT", "security_protocol": 0}]}
                ],
                "topic_states": [
                    {
                        "topic_name": "t",
                        "partition_states": [
                            {
                                "partition_index": 0,
                                "controller_epoch": 2,
                                "leader": 1,
                                "leader_epoch": 4,
                                "isr": [2],
                                "replicas": [1, 2],
                                "offline_replicas": [1],
                            }
                        ],
                    }
                ],
            },
        )
    )
    md = cache.topic_metadata("t")["partitions"][0]
    assert md["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE and md["leader_id"] == -1  # broker 1 is gone
    assert md["offline_replicas"] == [1]
    assert cache.topic_metadata("nope")["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cache.update(
        decoded(
            6,
            8,
            {
                "controller_id": 1,
                "controller_epoch": 2,
                "topic_states": [
                    {
                        "topic_name": "t",
                        "partition_states": [
                            {
                                "partition_index": 0,
                                "controller_epoch": 2,
                                "leader": -2,
                                "leader_epoch": 5,
                                "isr": [],
                                "replicas": [],
                            }
                        ],
                    }
                ],
            },
        )
    )
    assert "t" not in cache.partitions


def _topic(name, topic_id, leader=1):
    return {
        "topic_name": name,
        "topic_id": topic_id,
        "partition_states": [
            {
                "partition_index": 0,
                "controller_epoch": 1,
                "leader": leader,
                "leader_epoch": 0,
                "isr": [1],
                "replicas": [1],
            }
        ],
    }


def test_a_topic_is_found_by_its_id_and_a_recreated_one_by_its_new_id():
    import uuid

    first, second = uuid.UUID(int=1), uuid.UUID(int=2)
    cache = MetadataCache()
    live = [{"id": 1, "endpoints": [{"host": "a", "port": 1, "listener": "PLAINTEXT", "security_protocol": 0}]}]

    def update(*topics):
        cache.update(
            decoded(
                6, 8, {"controller_id": 1, "controller_epoch": 1, "live_brokers": live, "topic_states": list(topics)}
            )
        )

    update(_topic("t", first))
    assert cache.topic_name(first) == "t" and cache.topic_name(second) is None
    update(_topic("t", first, leader=-2))  # deleted (leader -2 during deletion)
    assert cache.topic_name(first) is None
    update(_topic("t", second))  # created again under the same name: a new id
    assert cache.topic_name(second) == "t" and cache.topic_name(first) is None
