"""Operators' transaction requests (what Kafka's Admin client sends for kafka-transactions.sh):
ListTransactions (key 66) to every broker, DescribeTransactions (key 65) to an id's coordinator
(FindCoordinator key type 1), DescribeProducers (key 61) to a partition's leader."""

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
            raise KafkaError(found.error_code, f"FindCoordinator({transactional_id})")
        coordinator = await cluster.connect(found.host, found.port)
        r = await coordinator.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        state = r.transaction_states[0]
        if state.error_code != ErrorCode.NONE:
            raise KafkaError(state.error_code, f"DescribeTransactions({transactional_id})")
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
            raise KafkaError(p.error_code, f"DescribeProducers({topic}-{partition})")
        return [dict(producer) for producer in p.active_producers]

    return await cluster.retry(attempt, "DescribeProducers")
