"""One broker's state as JSON-able data, served at `/api/local.json` and merged by `console.view`.

Shape (units: offsets; times in ms since the epoch, wall clock, for display only):
    {"broker_id", "controller_id", "controller_epoch", "active_controller": bool,
     "brokers": [{"id", "host", "port", "rack"}],                      # this broker's metadata cache
     "partitions": [{"topic", "partition", "leader", "leader_epoch", "replicas", "isr", "offline"}],
     "replicas": [{"topic", "partition", "leader": bool, "leader_epoch", "leo", "hw", "log_start",
                   "followers": {id: {"leo", "log_start", "caught_up_ms_ago"}}}],  # local replicas
     "groups": [{"group_id", "type", "state", "protocol", "members": [{"member_id", "client_id",
                 "host", "assignment": {topic: [partition]}}], "committed": [[topic, partition, offset]]}],
     "transactions": [{"transactional_id", "producer_id", "producer_epoch", "state", "timeout_ms",
                       "started_ms", "partitions": [[topic, partition]]}],
     "share_partitions": [{"group_id", "topic", "partition", "start_offset", "end_offset",
                           "records": {state: count}, "delivery_counts": [lowest, highest], "lag"}],
     "clients": console.clients.clients_snapshot's shape}

Groups and transactions are the ones this broker coordinates; share-partitions (KIP-932) the ones
it leads. Every object is read by attribute
(the broker's metadata cache, replica manager, group and transaction coordinators).
"""

from __future__ import annotations

import time
from typing import Any

from console.clients import clients_snapshot
from protocol import consumer_protocol


def local_snapshot(
    broker_id: int,
    metadata_cache,
    replica_manager,
    controller,
    groups=None,
    transactions=None,
    shares=None,
    server=None,
    client_metrics=None,
) -> dict:
    now = int(time.time() * 1000)
    return {
        "clients": clients_snapshot(server, client_metrics),
        "broker_id": broker_id,
        "controller_id": metadata_cache.controller_id,
        "controller_epoch": max(replica_manager.controller_epoch, controller.ctx.epoch if controller.active else 0),
        "active_controller": bool(controller.active),
        "brokers": [
            {"id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in sorted(metadata_cache.brokers.values(), key=lambda b: b.broker_id)
        ],
        "partitions": [
            {
                "topic": s.topic,
                "partition": s.partition,
                "leader": s.leader,
                "leader_epoch": s.leader_epoch,
                "replicas": list(s.replicas),
                "isr": list(s.isr),
                "offline": list(s.offline_replicas),
            }
            for topic in sorted(metadata_cache.partitions)
            for s in (metadata_cache.partitions[topic][i] for i in sorted(metadata_cache.partitions[topic]))
        ],
        "replicas": [_replica(p, now) for _, p in sorted(replica_manager.partitions.items())],
        "groups": _groups(groups),
        "transactions": _transactions(transactions),
        "share_partitions": [
            {
                "group_id": v.group_id,
                "topic": v.topic,
                "partition": v.partition,
                "start_offset": v.start_offset,
                "end_offset": v.end_offset,
                "records": v.records,
                "delivery_counts": list(v.delivery_counts),
                "lag": v.lag,
            }
            for v in (shares.share_partition_views() if shares is not None else [])
        ],
    }


def _replica(p, now: int) -> dict:
    return {
        "topic": p.topic,
        "partition": p.index,
        "leader": p.is_leader,
        "leader_epoch": p.leader_epoch,
        "leo": p.log_end_offset,
        "hw": p.high_watermark,
        "log_start": p.log.log_start_offset,
        "followers": {
            str(r): {
                "leo": state.log_end_offset,
                "log_start": state.log_start_offset,
                "caught_up_ms_ago": max(0, now - state.caught_up_ms()),
            }
            for r, state in sorted(p.remote.items())
        }
        if p.is_leader
        else {},
    }


def _classic_assignment(raw: bytes) -> dict[str, list[int]]:
    """A classic member's assignment bytes decoded as Kafka's ConsumerProtocol assignment (other
    protocols' bytes: {})."""
    try:
        return {t: sorted(ps) for t, ps in consumer_protocol.decode_assignment(raw).items()} if raw else {}
    except Exception:  # another protocol's bytes (connect, ...): not ours to read
        return {}


def _members(coordinator, group_id: str, g) -> list[dict[str, Any]]:
    """A group's members with their assignment by topic name: a consumer group's as
    ConsumerGroupDescribe answers it, a share group's as ShareGroupDescribe does (topic ids
    named), a classic group's from its members."""
    from coordinator.group.admin import describe_consumer_group, describe_share_group

    if g.share is not None:
        names = coordinator.consumer.metadata_cache.topic_names()
        return [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": {tp.topic_name: tp.partitions for tp in m.assignment},
            }
            for m in describe_share_group(coordinator.manager, group_id, names).members
        ]

    if g.consumer is not None:
        return [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": {tp.topic_name: tp.partitions for tp in m.assignment},
            }
            for m in describe_consumer_group(coordinator, group_id).members
        ]
    return [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "assignment": _classic_assignment(m.assignment),
        }
        for m in g.members.values()
    ]


def _groups(coordinator) -> list[dict[str, Any]]:
    if coordinator is None:
        return []
    from coordinator.group.admin import state_of

    return [
        {
            "group_id": group_id,
            "type": g.group_type,
            "state": state_of(g),
            "protocol": "share (KIP-932)"
            if g.share is not None
            else (g.protocol_name or "")
            if g.consumer is None
            else "consumer (KIP-848)",
            "members": _members(coordinator, group_id, g),
            "committed": [[t, p, c.offset] for (t, p), c in sorted(g.offsets.items())],
        }
        for group_id, g in sorted(coordinator.manager.groups.items())
    ]


def _transactions(coordinator) -> list[dict[str, Any]]:
    if coordinator is None:
        return []
    from coordinator.transaction.admin import STATE_NAMES
    from coordinator.transaction.transaction_metadata import TxnState

    out = []
    for txn_id, m in sorted(coordinator.manager.transactions.items()):
        if m.state == TxnState.DEAD:
            continue
        out.append(
            {
                "transactional_id": txn_id,
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "state": STATE_NAMES[m.state],
                "timeout_ms": m.txn_timeout_ms,
                "started_ms": m.txn_start_timestamp_ms,
                "partitions": sorted([t, p] for t, p in m.partitions),
            }
        )
    return out


def read_records(replica_manager, topic: str, partition: int, offset: int, limit: int) -> dict:
    """Up to `limit` committed records (below the HW) of a local replica from `offset`:
    {"topic", "partition", "log_start", "hw", "records": [{"offset", "timestamp", "key", "value",
    "headers": [[key, value]]}]} with keys, values and header values as hex strings (null for
    null); {"error": ...} when this broker has no replica of it or the offset is out of range."""
    from protocol import record_batch as rb
    from storage.errors import OffsetOutOfRange

    p = replica_manager.partitions.get((topic, partition))
    if p is None:
        return {"error": f"broker has no replica of {topic}-{partition}"}
    hw, start = p.high_watermark, p.log.log_start_offset
    offset = max(offset, start)
    records: list[dict] = []
    while offset < hw and len(records) < limit:
        try:
            info = p.log.read(offset, 1 << 20, hw, min_one_batch=True)
        except OffsetOutOfRange as e:
            return {"error": str(e)}
        if not info.records:
            break
        for pos, header in rb.iter_batches(info.records):
            if header.attributes & rb.CONTROL_BIT:  # transaction markers are not records
                continue
            for r in rb.decode_records(info.records, pos, header):
                if offset <= r.offset < hw and len(records) < limit:
                    records.append(
                        {
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "key": None if r.key is None else bytes(r.key).hex(),
                            "value": None if r.value is None else bytes(r.value).hex(),
                            "headers": [[h.key, None if h.value is None else bytes(h.value).hex()] for h in r.headers],
                        }
                    )
        if info.next_offset <= offset:
            break
        offset = info.next_offset
    return {"topic": topic, "partition": partition, "log_start": start, "hw": hw, "records": records}
