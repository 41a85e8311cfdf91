"""Socket-free fixtures for the broker core: real decoded requests and a replica manager over
real logs in a temp dir."""

import contextlib

from broker.config import build_config
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from protocol.api import decode_request, encode_request
from protocol.framing import FrameDecoder
from storage.log_manager import LogManager


def decoded(api_key: int, version: int, body: dict):
    """A request body exactly as the broker receives it (defaults filled by the decoder)."""
    (frame,) = FrameDecoder().feed(encode_request(api_key, version, 1, body))
    return decode_request(frame).body


def session_fetch(session_id: int = 0, epoch: int = -1, parts=(), forgotten=()):
    """A follower's (broker 2) decoded Fetch v12 in a fetch session (KIP-227); `parts`:
    (topic, partition, fetch_offset), only what changed for an incremental fetch; `forgotten`:
    (topic, partition) the session drops."""
    topics: dict = {}
    for topic, index, offset in parts:
        topics.setdefault(topic, []).append({"partition": index, "fetch_offset": offset, "partition_max_bytes": 1000})
    dropped: dict = {}
    for topic, index in forgotten:
        dropped.setdefault(topic, []).append(index)
    return decoded(
        1,
        12,
        {
            "replica_id": 2,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 10000,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in dropped.items()],
        },
    )


def follower_fetch(
    topic: str, partition: int, fetch_offset: int, replica_id: int = 2, max_bytes: int = 1000, max_wait_ms: int = 0
):
    """A follower's Fetch v12 (a consumer's with `replica_id` -1) for one partition, decoded as
    the broker receives it; no wait unless `max_wait_ms`."""
    return decoded(
        1,
        12,
        {
            "replica_id": replica_id,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": partition, "fetch_offset": fetch_offset, "partition_max_bytes": max_bytes}
                    ],
                }
            ],
        },
    )


def leader_and_isr(partitions, *, controller_epoch=1, leader_epoch=0, version=7, broker_epoch=-1):
    """partitions: {(topic, index): (leader, isr, replicas)}"""
    topics = {}
    for (topic, index), (leader, isr, replicas) in partitions.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": index,
                "controller_epoch": controller_epoch,
                "leader": leader,
                "leader_epoch": leader_epoch,
                "isr": isr,
                "replicas": replicas,
                "partition_epoch": 0,
            }
        )
    body = {"controller_id": 9, "controller_epoch": controller_epoch, "broker_epoch": broker_epoch}
    if version < 2:  # v0-1 list partition states ungrouped, each naming its topic
        body["ungrouped_partition_states"] = [{"topic_name": t, **p} for t, ps in topics.items() for p in ps]
    else:
        body["topic_states"] = [{"topic_name": t, "partition_states": ps} for t, ps in topics.items()]
    return decoded(4, version, body)


@contextlib.contextmanager
def replica_manager(tmp_path, **config):
    """A replica manager of broker 1 (min.insync.replicas 2 unless given) over real logs in
    `tmp_path`, with no ZooKeeper, its log manager and itself sharing one TopicConfigs as in a
    broker; the logs are shut down afterwards."""
    props = {"broker.id": "1", "zookeeper.connect": "h:1", "log.dirs": str(tmp_path), "min.insync.replicas": "2"}
    broker_config = build_config(props | {k.replace("_", "."): str(v) for k, v in config.items()})
    topic_configs = broker_config.topic_configs()
    manager = LogManager(broker_config.log_dirs, broker_config.log_config(), topic_config=topic_configs.log_config)
    manager.startup()
    try:
        yield ReplicaManager(broker_config, manager, MetadataCache(), topic_configs)
    finally:
        manager.shutdown()


def component_config(cls, **overrides):
    """A component's config dataclass (`broker.config.derive`) from a minimal broker config,
    with `overrides` (field names) on top: the table's defaults, as a broker would have them."""
    from broker.config import derive

    return derive(cls, build_config({"broker.id": "1", "zookeeper.connect": "h:1"}), **overrides)
