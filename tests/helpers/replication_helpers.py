"""Shared helpers for the replication tests (three broker processes, one ZooKeeper chroot)."""

import json

import trio

from client.connection import Connection
from protocol import record_batch as rb
from protocol.errors import ErrorCode


def partition_state(zk, topic, partition):
    return json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])


def controller_of(zk):
    from kazoo.exceptions import NoNodeError

    try:
        return json.loads(zk.get("/controller")[0])["brokerid"]
    except NoNodeError:
        return None


async def wait_for(predicate, timeout_s=20.0, interval=0.05, what="condition"):
    with trio.fail_after(timeout_s):
        while not predicate():
            await trio.sleep(interval)


async def wait_until_all_brokers_known(brokers) -> None:
    """Until every broker's Metadata lists all brokers: the controller has processed every
    registration (brokers start one after another; a topic created before that is short of replicas)."""
    with trio.fail_after(20):
        for b in brokers.values():
            while True:
                async with Connection.open(b.host, b.port) as conn:
                    md = await conn.request(3, {"topics": []})
                if len(md.brokers) == len(brokers) and md.controller_id >= 0:
                    break
                await trio.sleep(0.05)


async def create_topic(brokers, zk, name, partitions=1, rf=3, configs=None):
    """CreateTopics on the active controller (retrying NOT_CONTROLLER while one is elected), once
    the controller knows every broker."""
    await wait_until_all_brokers_known(brokers)
    with trio.fail_after(20):
        while True:
            cid = controller_of(zk)
            if cid is not None and cid in brokers:
                b = brokers[cid]
                async with Connection.open(b.host, b.port) as conn:
                    r = await conn.request(
                        19,
                        {
                            "topics": [
                                {
                                    "name": name,
                                    "num_partitions": partitions,
                                    "replication_factor": rf,
                                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                                }
                            ],
                            "timeout_ms": 10000,
                        },
                    )
                code = r.topics[0].error_code
                if code == ErrorCode.NONE:
                    return
                assert code == ErrorCode.NOT_CONTROLLER, ErrorCode(code).name
            await trio.sleep(0.1)


def log_bytes(broker, topic, partition, up_to_bytes=None):
    """The concatenated .log segments of a replica (the bytes on disk)."""
    d = broker.directory / "logs" / f"{topic}-{partition}"
    data = b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    return data if up_to_bytes is None else data[:up_to_bytes]


async def produce(broker, topic, value, acks, timeout_ms=2000):
    """One produce; retried (as clients do) only while the broker has not yet heard the controller's
    LeaderAndIsr for a partition whose znode already names it leader."""
    from client.connection import Connection

    propagating = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    with trio.fail_after(15 + timeout_ms / 1000):
        while True:
            async with Connection.open(broker.host, broker.port) as conn:
                r = await conn.request(
                    0,
                    {
                        "acks": acks,
                        "timeout_ms": timeout_ms,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [{"index": 0, "records": rb.build_batch([(None, value)])}],
                            }
                        ],
                    },
                    timeout_s=timeout_ms / 1000 + 10,
                )
            part = r.responses[0].partition_responses[0]
            if part.error_code not in propagating:
                return part
            await trio.sleep(0.1)


async def wait_for_isr(zk, topic, isr, partitions=1, timeout_s=20.0):
    """Wait until every partition of `topic` has exactly the brokers `isr` in its ISR (any order)."""
    for p in range(partitions):
        await wait_for(lambda p=p: sorted(partition_state(zk, topic, p)["isr"]) == sorted(isr), timeout_s=timeout_s)
