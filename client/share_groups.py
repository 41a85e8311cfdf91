"""Share group administration (KIP-932) for the CLI: ShareGroupDescribe (key 77) v1,
DescribeShareGroupOffsets (key 90) v0, AlterShareGroupOffsets (91) v0 and
DeleteShareGroupOffsets (92) v0, sent to the group's coordinator (FindCoordinator key type 0, as
for any group). Errors raise `KafkaError` (GROUP_ID_NOT_FOUND for a group that is not a
share group, ...)."""

from __future__ import annotations

from client import admin
from client.cluster import Cluster
from client.groups import _on_coordinator, _raise
from protocol.api_keys import ApiKey
from protocol.topic_partition import TopicPartition


async def describe_share_group(cluster: Cluster, group_id: str) -> dict:
    """{group_id, state, group_epoch, assignment_epoch, assignor, members: [{member_id,
    client_id, client_host, member_epoch, subscribed, assignment: [(topic, partition)]}]}."""
    r = await _on_coordinator(
        cluster,
        group_id,
        ApiKey.SHARE_GROUP_DESCRIBE,
        {"group_ids": [group_id], "include_authorized_operations": False},
        lambda r: _raise(r.groups[0].error_code, f"describing share group {group_id}"),
    )
    g = r.groups[0]
    return {
        "group_id": g.group_id,
        "state": g.group_state,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "assignor": g.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "subscribed": list(m.subscribed_topic_names or []),
                "assignment": sorted((t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions),
            }
            for m in g.members
        ],
    }


async def share_group_offsets(
    cluster: Cluster, group_id: str, topics: dict[str, list[int]] | None = None
) -> dict[TopicPartition, tuple[int, int, int]]:
    """(topic, partition) -> (share-partition start offset, leader epoch, lag) for the
    partitions asked (None: every topic the group's members subscribe to); -1 where the group
    never read; the lag (DescribeShareGroupOffsets v1, KIP-1226: records not yet done) is -1
    when the broker does not know it or serves only v0."""

    def check(r) -> None:
        _raise(r.groups[0].error_code, f"describing the offsets of share group {group_id}")
        for t in r.groups[0].topics:
            for p in t.partitions:
                _raise(
                    p.error_code,
                    f"describing the offset of share group {group_id} for {t.topic_name}-{p.partition_index}",
                )

    asked = None if topics is None else [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]
    r = await _on_coordinator(
        cluster,
        group_id,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        {"groups": [{"group_id": group_id, "topics": asked}]},
        check,
    )
    return {
        (t.topic_name, p.partition_index): (p.start_offset, p.leader_epoch, getattr(p, "lag", -1))
        for t in r.groups[0].topics
        for p in t.partitions
    }


async def alter_share_group_offsets(cluster: Cluster, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Start each share-partition over at its offset (the group must have no members:
    NON_EMPTY_GROUP). Raises KafkaError for the first error, top-level or per partition."""

    def check(r) -> None:
        _raise(r.error_code, f"altering the offsets of share group {group_id}")
        for t in r.responses:
            for p in t.partitions:
                _raise(
                    p.error_code,
                    f"altering the offset of share group {group_id} for {t.topic_name}-{p.partition_index}",
                )

    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "start_offset": offset})
    body = {"group_id": group_id, "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}
    await _on_coordinator(cluster, group_id, ApiKey.ALTER_SHARE_GROUP_OFFSETS, body, check)


async def delete_share_group_offsets(cluster: Cluster, group_id: str, topics: list[str]) -> None:
    """Forget the group's share state on `topics` (it reads them afresh, as
    `share.auto.offset.reset` says). Raises KafkaError (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION, ...)."""

    def check(r) -> None:
        _raise(r.error_code, f"deleting the offsets of share group {group_id}")
        for t in r.responses:
            _raise(t.error_code, f"deleting the offsets of share group {group_id} for topic {t.topic_name}")

    body = {"group_id": group_id, "topics": [{"topic_name": t} for t in topics]}
    await _on_coordinator(cluster, group_id, ApiKey.DELETE_SHARE_GROUP_OFFSETS, body, check)


GROUP_RESOURCE = 32  # the GROUP config resource type (KIP-848's group configs)
SET = 0  # IncrementalAlterConfigs' operation


async def alter_group_configs(cluster: Cluster, group_id: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of `configs` (e.g. `share.auto.offset.reset`) on the group's
    GROUP resource; raises KafkaError (INVALID_CONFIG for a key or value out of bounds)."""
    ops: list[tuple[str, int, str | None]] = [(k, SET, v) for k, v in configs.items()]
    error, message = await admin.incremental_alter_configs(cluster, GROUP_RESOURCE, group_id, ops)
    _raise(error, message or f"altering the configs of group {group_id}")
