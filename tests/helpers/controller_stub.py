"""The tests play the controller: they send LeaderAndIsr and UpdateMetadata over the wire, as a
Kafka ZooKeeper-mode controller does, using our client, with each broker's current broker epoch
(the czxid of its /brokers/ids registration, read from ZooKeeper as a controller does)."""

from __future__ import annotations

import json
import time
import uuid

import trio
from kazoo.client import KazooClient

from client.connection import Connection


def _broker_epochs(brokers, controller_id: int, controller_epoch: int) -> dict[int, int]:
    """{broker id: czxid of /brokers/ids/<id>} (blocking; run in a thread). As a controller that
    won the election would, make /controller_epoch and /controller name this stub's epoch and
    id when its epoch is newer: brokers believe a new controller epoch only when ZooKeeper does.
    First waits (up to 15 s) for the brokers' own controller election: a broker answers before
    its election is done, and an election after these writes would raise the epoch past this
    stub's (its /controller, ephemeral, goes with this session), fencing its requests."""
    client = KazooClient(hosts=brokers[0].properties["zookeeper.connect"])
    client.start(10)
    try:
        deadline = time.monotonic() + 15
        while client.exists("/controller") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        found = client.exists("/controller_epoch")
        if found is None or int(client.get("/controller_epoch")[0]) < controller_epoch:
            client.ensure_path("/controller_epoch")
            client.set("/controller_epoch", str(controller_epoch).encode())
            data = json.dumps({"version": 1, "brokerid": controller_id, "timestamp": "0"}).encode()
            if client.exists("/controller") is None:
                client.create("/controller", data, ephemeral=True)
            else:
                client.set("/controller", data)
        return {b.broker_id: client.get(f"/brokers/ids/{b.broker_id}")[1].czxid for b in brokers}
    finally:
        client.stop()
        client.close()


def _states(assignment, leader_epoch, controller_epoch, isr=None):
    """assignment: {topic: [[replica, ...] per partition]}; the first replica leads."""
    topics = []
    for topic, partitions in assignment.items():
        states = []
        for index, replicas in enumerate(partitions):
            leader = replicas[0] if replicas else -1
            states.append(
                {
                    "partition_index": index,
                    "controller_epoch": controller_epoch,
                    "leader": leader,
                    "leader_epoch": leader_epoch,
                    "isr": list(isr.get((topic, index), replicas)) if isr else list(replicas),
                    "partition_epoch": 0,
                    "zk_version": 0,
                    "replicas": list(replicas),
                }
            )
        topics.append((topic, states))
    return topics


async def assign(
    brokers,
    assignment: dict[str, list[list[int]]],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    controller_id: int | None = None,
    topic_ids: dict[str, uuid.UUID] | None = None,
) -> dict:
    """Send LeaderAndIsr to every replica and UpdateMetadata to every broker. Returns the
    LeaderAndIsr responses by broker id."""
    topic_ids = topic_ids or {t: uuid.uuid4() for t in assignment}
    states = _states(assignment, leader_epoch, controller_epoch)
    live = [
        {
            "id": b.broker_id,
            "v0_host": b.host,
            "v0_port": b.port,
            "rack": None,
            "endpoints": [{"port": b.port, "host": b.host, "listener": "PLAINTEXT", "security_protocol": 0}],
        }
        for b in brokers
    ]
    controller_id = brokers[0].broker_id if controller_id is None else controller_id
    epochs = await trio.to_thread.run_sync(_broker_epochs, brokers, controller_id, controller_epoch)
    responses = {}
    for broker in brokers:
        async with Connection.open(broker.host, broker.port) as conn:
            mine = [
                {
                    "topic_name": t,
                    "topic_id": topic_ids[t],
                    "partition_states": [s for s in ss if broker.broker_id in s["replicas"]],
                }
                for t, ss in states
            ]
            mine = [t for t in mine if t["partition_states"]]
            if mine:
                responses[broker.broker_id] = await conn.request(
                    4,
                    {
                        "controller_id": controller_id,
                        "controller_epoch": controller_epoch,
                        "broker_epoch": epochs[broker.broker_id],
                        "topic_states": mine,
                        "live_leaders": [
                            {"broker_id": b.broker_id, "host_name": b.host, "port": b.port} for b in brokers
                        ],
                    },
                )
            await conn.request(
                6,
                {
                    "controller_id": controller_id,
                    "controller_epoch": controller_epoch,
                    "broker_epoch": epochs[broker.broker_id],
                    "topic_states": [
                        {"topic_name": t, "topic_id": topic_ids[t], "partition_states": ss} for t, ss in states
                    ],
                    "live_brokers": live,
                },
            )
    return responses
