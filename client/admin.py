"""Admin requests as Kafka's AdminClient routes them, for the CLI: to the active controller
(CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, partition reassignments; retried while
NOT_CONTROLLER), to a broker's own resource (DescribeConfigs / IncrementalAlterConfigs of a broker,
DescribeLogDirs), or to each partition's leader (DeleteRecords, retried on NOT_LEADER_OR_FOLLOWER).
Results come back as plain tuples; error codes are left to the caller to report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import trio

from client.cluster import Cluster, ConnectionClosed, KafkaError
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def on_controller(cluster: Cluster, api_key: ApiKey, make_body: Callable[[int], dict], errors_of) -> Any:
    """Send `make_body(version)` to the active controller and return `errors_of(response)`: a list
    of (name, code, message), or a response whose top-level `error_code` says NOT_CONTROLLER;
    retried while the controller moves."""

    async def attempt(refresh):
        md = await cluster.refresh_metadata([])
        if md.controller_id < 0:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller yet")
        conn = await cluster.broker_connection(md.controller_id)
        version = conn.version_for(api_key)
        response = await conn.request(api_key, make_body(version), version=version)
        if response.get("error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
        results = errors_of(response)
        if isinstance(results, list) and any(r[1] == ErrorCode.NOT_CONTROLLER for r in results):
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
        return results

    return await cluster.retry(attempt, "controller request")


async def wait_for_brokers(bootstrap: str, count: int, timeout_s: float, security=None) -> int:
    """Until Metadata lists `count` brokers and a controller (a cluster just started); the
    controller's id. Each attempt opens its own connections, as a broker still starting refuses
    them. Raises trio.TooSlowError after `timeout_s`."""
    with trio.fail_after(timeout_s):
        while True:
            try:
                async with Cluster.open(bootstrap, retries=0, security=security) as cluster:
                    md = await cluster.refresh_metadata([])
                    if md.controller_id >= 0 and len(md.brokers) >= count:
                        return md.controller_id
            except ConnectionClosed:
                pass
            await trio.sleep(0.1)


async def _resource_connection(cluster: Cluster, resource_type: int, name: str):
    await cluster.refresh_metadata([])
    if resource_type == BROKER and name:
        return await cluster.broker_connection(int(name))
    return await cluster.any_connection()


async def describe_configs(cluster: Cluster, resource_type: int, name: str) -> list:
    """DescribeConfigs (v4, with synonyms) of one resource: its config entries; raises KafkaError."""
    conn = await _resource_connection(cluster, resource_type, name)
    body = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    result = (await conn.request(ApiKey.DESCRIBE_CONFIGS, body)).results[0]
    if result.error_code != ErrorCode.NONE:
        raise KafkaError(result.error_code, result.error_message or name)
    return list(result.configs)


async def incremental_alter_configs(
    cluster: Cluster, resource_type: int, name: str, ops: list[tuple[str, int, str | None]]
) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of one resource: (error code, message)."""
    conn = await _resource_connection(cluster, resource_type, name)
    body = {
        "resources": [
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
            }
        ],
        "validate_only": False,
    }
    response = (await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)).responses[0]
    return response.error_code, response.error_message


async def create_partitions(cluster: Cluster, topic: str, count: int) -> list:
    return await on_controller(
        cluster,
        ApiKey.CREATE_PARTITIONS,
        lambda version: {
            "topics": [{"name": topic, "count": count, "assignments": None}],
            "timeout_ms": 30000,
            "validate_only": False,
        },
        lambda r: [(t.name, t.error_code, t.error_message) for t in r.results],
    )


async def delete_records(cluster: Cluster, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """DeleteRecords to each partition's leader: partition -> (low watermark, error code)."""
    results: dict[TopicPartition, tuple[int, int]] = {}
    for tp, offset in sorted(offsets.items()):

        async def attempt(refresh, tp=tp, offset=offset):
            conn = await cluster.leader_connection(tp[0], tp[1], refresh=refresh)
            body = {"topics": [{"name": tp[0], "partitions": [{"partition_index": tp[1], "offset": offset}]}]}
            p = (await conn.request(ApiKey.DELETE_RECORDS, {**body, "timeout_ms": 30000})).topics[0].partitions[0]
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                raise KafkaError(p.error_code, f"{tp[0]}-{tp[1]}")
            return p.low_watermark, p.error_code

        try:
            results[tp] = await cluster.retry(attempt, "DeleteRecords")
        except KafkaError as e:
            results[tp] = (-1, e.error_code)
    return results


async def alter_reassignments(
    cluster: Cluster, targets: dict[TopicPartition, list[int] | None]
) -> list[tuple[str, int, str | None]]:
    """AlterPartitionReassignments: [("topic-partition", code, message)]."""
    topics: dict[str, list] = {}
    for (topic, p), replicas in sorted(targets.items()):
        topics.setdefault(topic, []).append({"partition_index": p, "replicas": replicas})
    return await on_controller(
        cluster,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        lambda version: {"timeout_ms": 30000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
        lambda r: [
            (f"{t.name}-{p.partition_index}", p.error_code, p.error_message) for t in r.responses for p in t.partitions
        ],
    )


async def list_reassignments(cluster: Cluster) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments: partition -> (replicas, adding, removing) of the ongoing ones."""
    response = await on_controller(
        cluster, ApiKey.LIST_PARTITION_REASSIGNMENTS, lambda version: {"timeout_ms": 30000, "topics": None}, lambda r: r
    )
    if response.error_code != ErrorCode.NONE:
        raise KafkaError(response.error_code, response.error_message or "ListPartitionReassignments")
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


async def describe_log_dirs(cluster: Cluster, broker_id: int, topics: list[str] | None) -> list:
    """DescribeLogDirs of one broker (topics None: every partition)."""
    await cluster.refresh_metadata(topics)
    wanted = None
    if topics is not None:
        wanted = [{"topic": t, "partitions": sorted(cluster.metadata.topics.get(t, {}))} for t in topics]
    conn = await cluster.broker_connection(broker_id)
    return list((await conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted})).results)


async def describe_client_quotas(cluster: Cluster, components: list[tuple[str, int, str | None]], strict: bool):
    """DescribeClientQuotas (KIP-546): [(entity components, {key: value})] matching the filter
    components (entity type, match type 0 exact / 1 default / 2 any, name); raises KafkaError."""
    conn = await cluster.any_connection()
    body = {
        "components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
        "strict": strict,
    }
    response = await conn.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body)
    if response.error_code != ErrorCode.NONE:
        raise KafkaError(response.error_code, response.error_message or "DescribeClientQuotas")
    return [
        ([(e.entity_type, e.entity_name) for e in entry.entity], {v.key: v.value for v in entry["values"]})
        for entry in response.entries or []
    ]


async def alter_client_quotas(
    cluster: Cluster, entity: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]
) -> tuple[int, str | None]:
    """AlterClientQuotas of one entity ([(entity type, name or None for the default)]); ops are
    (key, value) to set or (key, None) to remove: (error code, message)."""
    conn = await cluster.any_connection()
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
            }
        ],
        "validate_only": False,
    }
    entry = (await conn.request(ApiKey.ALTER_CLIENT_QUOTAS, body)).entries[0]
    return entry.error_code, entry.error_message


async def upsert_scram_credential(
    cluster: Cluster, user: str, mechanism: str, password: str, iterations: int
) -> tuple[int, str | None]:
    """AlterUserScramCredentials (key 51) adding or replacing `user`'s credential: the password
    is salted here (a random 32-byte salt, PBKDF2 with `iterations`), only the salted form
    travels. (error code, message)."""
    from security.credentials import MECHANISM_NUMBERS
    from security.scram import salted_password

    salt = os.urandom(32)
    body = {
        "deletions": [],
        "upsertions": [
            {
                "name": user,
                "mechanism": MECHANISM_NUMBERS[mechanism],
                "iterations": iterations,
                "salt": salt,
                "salted_password": salted_password(mechanism, password, salt, iterations),
            }
        ],
    }
    conn = await cluster.any_connection()
    result = (await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)).results[0]
    return result.error_code, result.error_message
