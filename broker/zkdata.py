"""Kafka's ZooKeeper layout and JSON (Kafka 3.x `kafka.zk.ZkData`), for brokers and the controller.

Paths: /brokers/ids/<id> (ephemeral broker registration), /brokers/topics/<topic> (assignment),
/brokers/topics/<topic>/partitions/<p>/state (leader and ISR), /controller, /controller_epoch,
/cluster/id, /config/topics/<topic>, /admin/delete_topics/<topic>,
/isr_change_notification/isr_change_<seq>, /latest_producer_id_block.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
PERSISTENT_PATHS = ["/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/topics",
                    "/config/changes", "/admin/delete_topics", "/isr_change_notification",
                    "/latest_producer_id_block"]


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/<id>, version 5 (Kafka `BrokerIdZNode`)."""

    broker_id: int
    endpoints: list[tuple[str, str, int]]     # (listener name, host, port)
    rack: str | None = None

    def encode(self) -> bytes:
        name, host, port = self.endpoints[0]
        body = {"features": {}, "listener_security_protocol_map": {n: "PLAINTEXT" for n, _, _ in self.endpoints},
                "endpoints": [f"{n}://{h}:{p}" for n, h, p in self.endpoints], "jmx_port": -1,
                "port": port, "host": host, "version": 5, "timestamp": str(int(time.time() * 1000))}
        if self.rack:
            body["rack"] = self.rack
        return _dumps(body)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> "BrokerRegistration":
        body = json.loads(data)
        endpoints = []
        for ep in body.get("endpoints", []):
            name, rest = ep.split("://", 1)
            host, port = rest.rsplit(":", 1)
            endpoints.append((name, host.strip("[]"), int(port)))
        if not endpoints and "host" in body:
            endpoints = [("PLAINTEXT", body["host"], int(body["port"]))]
        return cls(broker_id, endpoints, body.get("rack"))


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
