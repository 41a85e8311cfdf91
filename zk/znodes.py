"""Kafka's ZooKeeper layout and JSON (Kafka 3.x `kafka.zk.ZkData`), for brokers and the controller.

Paths: /brokers/ids/<id> (ephemeral broker registration), /brokers/topics/<topic> (assignment),
/brokers/topics/<topic>/partitions/<p>/state (leader and ISR), /controller, /controller_epoch,
/cluster/id, /config/topics/<topic>, /config/brokers/<id>|<default>,
/config/changes/config_change_<seq>, /admin/delete_topics/<topic>,
/isr_change_notification/isr_change_<seq>, /log_dir_event_notification/log_dir_event_<seq>,
/latest_producer_id_block.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"
CONFIG_GROUPS = "/config/groups"  # KIP-932's group configs (Kafka keeps them in KRaft metadata)
CONFIG_CLIENT_METRICS = "/config/client-metrics"  # KIP-714's subscriptions (KRaft metadata in Kafka)
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_FAILURE_EVENT = 1  # Kafka's LogDirEventNotificationHandler.LogDirFailureEvent
PERSISTENT_PATHS = [
    "/brokers/ids",
    "/brokers/topics",
    "/brokers/seqid",
    "/config/topics",
    "/config/brokers",
    "/config/users",
    "/config/groups",
    "/config/client-metrics",
    "/config/changes",
    "/admin/delete_topics",
    "/isr_change_notification",
    "/log_dir_event_notification",
    "/latest_producer_id_block",
]


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
    endpoints: list[tuple[str, str, int]]  # (listener name, host, port)
    rack: str | None = None
    protocols: dict[str, str] = field(default_factory=dict)  # listener name -> security protocol
    #: the broker's web console (its metrics port), "http://host:port"; minikafka's own field,
    #: which Kafka's readers of this znode ignore
    console_url: str | None = None

    def protocol_of(self, listener: str) -> str:
        return self.protocols.get(listener, "PLAINTEXT")

    def encode(self) -> bytes:
        name, host, port = self.endpoints[0]
        body = {
            "features": {},
            "listener_security_protocol_map": {n: self.protocol_of(n) for n, _, _ in self.endpoints},
            "endpoints": [f"{n}://{h}:{p}" for n, h, p in self.endpoints],
            "jmx_port": -1,
            "port": port,
            "host": host,
            "version": 5,
            "timestamp": str(int(time.time() * 1000)),
        }
        if self.rack:
            body["rack"] = self.rack
        if self.console_url:
            body["minikafka_console"] = self.console_url
        return _dumps(body)

    def endpoint_for(self, listener: str | None) -> tuple[str, int]:
        """(host, port) of the named listener; the first endpoint when `listener` is None or this
        broker does not have it."""
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return self.endpoints[0][1], self.endpoints[0][2]

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        body = json.loads(data)
        endpoints = []
        for ep in body.get("endpoints", []):
            name, rest = ep.split("://", 1)
            host, port = rest.rsplit(":", 1)
            endpoints.append((name, host.strip("[]"), int(port)))
        if not endpoints and "host" in body:
            endpoints = [("PLAINTEXT", body["host"], int(body["port"]))]
        protocols = body.get("listener_security_protocol_map") or {}
        return cls(
            broker_id,
            endpoints,
            body.get("rack"),
            {str(k): str(v) for k, v in protocols.items()},
            body.get("minikafka_console"),
        )


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return json.loads(data)["id"]


def new_cluster_id() -> str:
    """Kafka's format: a random UUID, URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid string: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def encode_topic_assignment(
    assignment: dict[int, list[int]],
    topic_id: uuid.UUID,
    adding: dict[int, list[int]] | None = None,
    removing: dict[int, list[int]] | None = None,
) -> bytes:
    """/brokers/topics/<topic>, version 3 (topic ids, KIP-516), with the replicas being added and
    removed by ongoing reassignments (KIP-455)."""
    return _dumps(
        {
            "version": 3,
            "topic_id": topic_id_to_str(topic_id),
            "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r},
        }
    )


def decode_reassignment_state(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """(adding replicas, removing replicas) per partition of a /brokers/topics/<topic> znode."""
    body = json.loads(data)
    return (
        {int(p): list(r) for p, r in (body.get("adding_replicas") or {}).items()},
        {int(p): list(r) for p, r in (body.get("removing_replicas") or {}).items()},
    )


def encode_reassign_partitions(targets: dict[tuple[str, int], list[int]]) -> bytes:
    """/admin/reassign_partitions (Kafka's ReassignPartitionsZNode, version 1)."""
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
                for (t, p), r in sorted(targets.items())
            ],
        }
    )


def decode_reassign_partitions(data: bytes) -> dict[tuple[str, int], list[int]]:
    """The targets in /admin/reassign_partitions; raises ValueError for malformed JSON."""
    try:
        body = json.loads(data)
        return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]] for e in body["partitions"]}
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise ValueError(f"malformed /admin/reassign_partitions: {e}") from None


def decode_topic_assignment(data: bytes) -> tuple[dict[int, list[int]], uuid.UUID | None]:
    body = json.loads(data)
    topic_id = body.get("topic_id")
    return ({int(p): list(r) for p, r in body["partitions"].items()}, topic_id_from_str(topic_id) if topic_id else None)


@dataclass(frozen=True)
class LeaderIsr:
    """/brokers/topics/<t>/partitions/<p>/state (version 1) plus its zkVersion."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, zk_version: int) -> LeaderIsr:
        body = json.loads(data)
        return cls(body["leader"], body["leader_epoch"], tuple(body["isr"]), body["controller_epoch"], zk_version)


def encode_controller(broker_id: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def controller_id_of(data: bytes | None) -> int:
    """The broker id /controller names; -1 when it is absent or unreadable (no controller)."""
    if data is None:
        return -1
    try:
        return decode_controller(data)
    except (ValueError, KeyError, TypeError):
        return -1


def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_topic_config(data: bytes) -> dict[str, str]:
    return dict(json.loads(data).get("config", {}))


def encode_partitions(partitions: list[tuple[str, int]]) -> bytes:
    """The body of isr_change notifications and /admin/preferred_replica_election."""
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def encode_log_dir_event(broker_id: int) -> bytes:
    """/log_dir_event_notification/log_dir_event_<seq> (Kafka's LogDirEventNotificationZNode)."""
    return _dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    """The broker id of a log dir failure event."""
    return int(json.loads(data)["broker"])


def decode_partitions(data: bytes) -> list[tuple[str, int]]:
    return [(p["topic"], int(p["partition"])) for p in json.loads(data).get("partitions", [])]


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """/config/changes/config_change_<seq>, version 2 (Kafka's ConfigEntityChangeNotificationZNode):
    `entity_type` is "topics" or "brokers"."""
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification; version 1 notifications (Kafka before
    0.10.1: {"version":1,"entity_type":...,"entity_name":...}) are read too. Raises ValueError."""
    body = json.loads(data)
    if body.get("version") == 1:
        return str(body["entity_type"]), str(body["entity_name"])
    entity_type, sep, name = str(body.get("entity_path", "")).partition("/")
    if not sep or not name:
        raise ValueError(f"bad config change notification {body!r}")
    return entity_type, name
