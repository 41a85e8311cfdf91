"""Socket-free fixtures for the broker core: real decoded requests and a replica manager over
real logs in a temp dir."""

from protocol.api import decode_request, encode_request
from protocol.framing import FrameDecoder


def decoded(api_key: int, version: int, body: dict):
    """A request body exactly as the broker receives it (defaults filled by the decoder)."""
    (frame,) = FrameDecoder().feed(encode_request(api_key, version, 1, body))
    return decode_request(frame).body


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
