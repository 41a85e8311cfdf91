"""Operators' transaction requests (what Kafka's Admin client sends for kafka-transactions.sh):
ListTransactions (key 66) to every broker, DescribeTransactions (key 65) to an id's coordinator
(FindCoordinator key type 1), DescribeProducers (key 61) to a partition's leader, and KIP-664's
hanging transactions: found from those three, ended with WriteTxnMarkers (key 27)."""

from __future__ import annotations

from client.cluster import Cluster, KafkaError
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode


async def list_transactions(
    cluster: Cluster, states: list[str] | None = None, producer_ids: list[int] | None = None, min_duration_ms: int = -1
) -> list[dict]:
    """[{transactional_id, producer_id, transaction_state, coordinator}] from every broker."""
    md = await cluster.refresh_metadata([])
    out = []
    for broker_id in sorted(md.brokers):
        conn = await cluster.broker_connection(broker_id)
        body = {
            "state_filters": states or [],
            "producer_id_filters": producer_ids or [],
            "duration_filter": min_duration_ms,
        }
        r = await conn.request(ApiKey.LIST_TRANSACTIONS, body)
        if r.error_code != ErrorCode.NONE:
            raise KafkaError(r.error_code, f"ListTransactions on broker {broker_id}")
        out += [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.transaction_state,
                "coordinator": broker_id,
            }
            for t in r.transaction_states
        ]
    return out


async def describe_transaction(cluster: Cluster, transactional_id: str) -> dict:
    """The coordinator's view of one id (raises KafkaError, e.g. TRANSACTIONAL_ID_NOT_FOUND)."""

    async def attempt(refresh: bool):
        await cluster.refresh_metadata([])
        conn = await cluster.any_connection()
        found = await conn.request(ApiKey.FIND_COORDINATOR, {"key": transactional_id, "key_type": 1}, version=3)
        if found.error_code != ErrorCode.NONE:
            raise KafkaError(found.error_code, f"finding the coordinator of transactional id {transactional_id}")
        coordinator = await cluster.connect(found.host, found.port)
        r = await coordinator.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        state = r.transaction_states[0]
        if state.error_code != ErrorCode.NONE:
            raise KafkaError(state.error_code, f"describing transactional id {transactional_id}")
        return {
            "coordinator": found.node_id,
            "transactional_id": transactional_id,
            "producer_id": state.producer_id,
            "producer_epoch": state.producer_epoch,
            "transaction_state": state.transaction_state,
            "transaction_timeout_ms": state.transaction_timeout_ms,
            "transaction_start_time_ms": state.transaction_start_time_ms,
            "partitions": [(t.topic, p) for t in state.topics for p in t.partitions],
        }

    return await cluster.retry(attempt, "DescribeTransactions")


async def describe_producers(cluster: Cluster, topic: str, partition: int) -> list[dict]:
    """The active producers of a partition, as its leader holds them."""

    async def attempt(refresh: bool):
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.DESCRIBE_PRODUCERS, {"topics": [{"name": topic, "partition_indexes": [partition]}]}
        )
        p = r.topics[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            raise KafkaError(p.error_code, f"describing the producers of {topic}-{partition}")
        return [dict(producer) for producer in p.active_producers]

    return await cluster.retry(attempt, "DescribeProducers")


async def find_hanging(
    cluster: Cluster,
    *,
    topic: str | None = None,
    partition: int | None = None,
    broker_id: int | None = None,
    max_transaction_timeout_ms: int = 900000,
    now_ms: int,
) -> list[dict]:
    """Hanging transactions (KIP-664, kafka-transactions.sh find-hanging): on each partition of
    `topic` (or only `partition`), or each partition with a replica on `broker_id`, a producer
    whose transaction has been open longer than `max_transaction_timeout_ms` (ms since its last
    write, at wall-clock `now_ms`) and that its coordinator does not hold as Ongoing with that
    partition at that epoch. Each: topic, partition, producer_id, producer_epoch,
    coordinator_epoch, start_offset, last_timestamp, duration_ms."""
    md = await cluster.refresh_metadata(None if topic is None else [topic])
    wanted = [
        (t, p)
        for t, parts in sorted(md.topics.items())
        for p, info in sorted(parts.items())
        if (topic is None or t == topic)
        and (partition is None or p == partition)
        and (broker_id is None or broker_id in info.replicas)
    ]
    open_txns = []
    for t, p in wanted:
        for producer in await describe_producers(cluster, t, p):
            start = producer["current_txn_start_offset"]
            duration = now_ms - producer["last_timestamp"]
            if start >= 0 and duration > max_transaction_timeout_ms:
                open_txns.append(
                    {
                        "topic": t,
                        "partition": p,
                        "producer_id": producer["producer_id"],
                        "producer_epoch": producer["producer_epoch"],
                        "coordinator_epoch": producer["coordinator_epoch"],
                        "start_offset": start,
                        "last_timestamp": producer["last_timestamp"],
                        "duration_ms": duration,
                    }
                )
    if not open_txns:
        return []
    ids = {
        t["transactional_id"]: t
        for t in await list_transactions(cluster, producer_ids=[o["producer_id"] for o in open_txns])
    }
    hanging = []
    for candidate in open_txns:
        owner = next((tid for tid, t in ids.items() if t["producer_id"] == candidate["producer_id"]), None)
        if owner is not None:
            state = await describe_transaction(cluster, owner)
            if (
                state["transaction_state"] == "Ongoing"
                and state["producer_epoch"] == candidate["producer_epoch"]
                and (candidate["topic"], candidate["partition"]) in state["partitions"]
            ):
                continue  # a live transaction its coordinator will end
        hanging.append(candidate)
    return hanging


async def abort_transaction(
    cluster: Cluster, topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> None:
    """Write an ABORT marker for the producer's open transaction on one partition (KIP-664's
    `Admin.abortTransaction`: WriteTxnMarkers to the partition's leader; needs CLUSTER_ACTION).
    Raises KafkaError with the partition's error."""

    async def attempt(refresh: bool):
        conn = await cluster.leader_connection(topic, partition, refresh)
        r = await conn.request(
            ApiKey.WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": False,
                        "topics": [{"name": topic, "partition_indexes": [partition]}],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
        code = r.markers[0].topics[0].partitions[0].error_code
        if code != ErrorCode.NONE:
            raise KafkaError(code, f"writing transaction markers to {topic}-{partition}")

    await cluster.retry(attempt, "WriteTxnMarkers")
