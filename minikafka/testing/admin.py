"""`Admin`: blocking admin calls on a cluster for test code, on minikafka's own client (each call
runs its own trio loop, so it works from plain pytest tests and outside any event loop; not
from inside a running trio or asyncio loop's task - use the async client there).

Kafka APIs used: Metadata (3), CreateTopics (19), DeleteTopics (20), ListOffsets (2), Fetch (1),
Produce (0), OffsetFetch (9), ListGroups (16). Errors: `client.cluster.KafkaError` with Kafka's
error code (for example TOPIC_ALREADY_EXISTS), `TimeoutError` when a wait runs out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from client.admin import on_controller, wait_for_brokers
from client.cluster import Cluster, KafkaError, PartitionInfo
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

Record = rb.Record


class Admin:
    """`bootstrap`: `host:port,...`; `security`: `security.config.ClientSecurity` (None: PLAINTEXT)."""

    def __init__(self, bootstrap: str, security=None, timeout_s: float = 30.0):
        self.bootstrap, self.security, self.timeout_s = bootstrap, security, timeout_s

    def _run(self, fn, *args) -> Any:
        async def main():
            with trio.fail_after(self.timeout_s):
                async with Cluster.open(self.bootstrap, security=self.security) as cluster:
                    return await fn(cluster, *args)

        try:
            return trio.run(main)
        except trio.TooSlowError:
            raise TimeoutError(f"{getattr(fn, '__name__', 'admin call')} took over {self.timeout_s} s") from None

    # -- cluster -----------------------------------------------------------------------------

    def wait_for_brokers(self, count: int, timeout_s: float = 60.0) -> int:
        """Wait until Metadata lists `count` brokers and a controller; the controller's id.
        Raises TimeoutError."""
        try:
            return trio.run(wait_for_brokers, self.bootstrap, count, timeout_s, self.security)
        except trio.TooSlowError:
            raise TimeoutError(f"the cluster did not show {count} brokers and a controller in {timeout_s} s") from None

    def brokers(self) -> dict[int, tuple[str, int]]:
        """{broker id: (host, port)} of the registered brokers."""
        return self._run(lambda cluster: cluster.refresh_metadata([])).brokers

    def controller(self) -> int:
        return self._run(lambda cluster: cluster.refresh_metadata([])).controller_id

    # -- topics ------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int = -1, config: dict[str, str] | None = None
    ) -> str:
        """CreateTopics, then wait until every broker's Metadata gives every partition a leader,
        so the first produce anywhere succeeds. `replication_factor` -1: the broker's
        default.replication.factor. Returns `name`; raises KafkaError (TOPIC_ALREADY_EXISTS, ...)."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()],
                }
            ],
            "timeout_ms": int(self.timeout_s * 1000),
        }

        async def create(cluster: Cluster) -> None:
            results = await on_controller(
                cluster,
                ApiKey.CREATE_TOPICS,
                lambda version: body,
                lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics],
            )
            for topic, code, message in results:
                if code != ErrorCode.NONE:
                    raise KafkaError(code, message or topic)
            await _wait_everywhere(cluster, name, lambda parts: parts is not None and len(parts) == partitions)

        self._run(create)
        return name

    def delete_topic(self, name: str) -> None:
        """DeleteTopics, then wait until no broker lists the topic."""

        async def delete(cluster: Cluster) -> None:
            results = await on_controller(
                cluster,
                ApiKey.DELETE_TOPICS,
                lambda v: {
                    **({"topics": [{"name": name}]} if v >= 6 else {"topic_names": [name]}),
                    "timeout_ms": 30000,
                },
                lambda r: [(t.name, t.error_code, None) for t in r.responses],
            )
            for topic, code, _ in results:
                if code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    raise KafkaError(code, topic)
            await _wait_everywhere(cluster, name, lambda parts: parts is None)

        self._run(delete)

    def topics(self) -> list[str]:
        """The names of every topic, internal ones included, sorted."""
        return sorted(self._run(lambda cluster: cluster.refresh_metadata(None)).topics)

    def describe_topic(self, name: str) -> dict[int, PartitionInfo]:
        """{partition: PartitionInfo(leader, leader_epoch, replicas, isr)}; KafkaError when unknown."""

        async def describe(cluster: Cluster):
            md = await cluster.refresh_metadata([name])
            if name not in md.topics:
                raise KafkaError(md.topic_errors.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name)
            return md.topics[name]

        return self._run(describe)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """{partition: high watermark} (ListOffsets LATEST)."""
        from client.reads import LATEST, list_offset

        async def offsets(cluster: Cluster):
            parts = await cluster.partitions(topic)
            return {p: await list_offset(cluster, topic, p, LATEST) for p in sorted(parts)}

        return self._run(offsets)

    # -- records -----------------------------------------------------------------------------

    def produce(self, topic: str, values: Iterable[bytes | str | tuple], partition: int | None = None) -> int:
        """Write records with acks=all (idempotent): each item a value, or a (key, value) pair;
        str is encoded as UTF-8. Returns how many were written."""
        from client.producer import Producer

        def raw(v):
            return v.encode() if isinstance(v, str) else v

        items = [(raw(v[0]), raw(v[1])) if isinstance(v, tuple) else (None, raw(v)) for v in values]

        async def write(cluster: Cluster) -> int:
            async with Producer.open(cluster) as producer:
                deliveries = [await producer.send(topic, v, key=k, partition=partition) for k, v in items]
                await producer.flush()
                for delivery in deliveries:
                    await delivery.wait()
            return len(deliveries)

        return self._run(write)

    def records(self, topic: str, partition: int | None = None) -> list[Record]:
        """Every committed record (up to the high watermark) of one partition or of all, in
        offset order per partition: `Record(offset, timestamp, key, value, headers, attributes)`."""
        from client.reads import EARLIEST, LATEST, fetch, list_offset, reader_batches

        async def read(cluster: Cluster) -> list[Record]:
            parts = [partition] if partition is not None else sorted(await cluster.partitions(topic))
            out: list[Record] = []
            for p in parts:
                offset = await list_offset(cluster, topic, p, EARLIEST)
                end = await list_offset(cluster, topic, p, LATEST)
                while offset < end:
                    fetched = await fetch(cluster, topic, p, offset, max_wait_ms=0, max_bytes=1 << 20)
                    data = fetched.records
                    if not data:
                        break
                    for pos, header, visible in reader_batches(data):
                        offset = max(offset, header.base_offset + header.last_offset_delta + 1)
                        if visible:
                            out += [r for r in rb.decode_records(data, pos, header) if r.offset < end]
            return out

        return self._run(read)

    # -- groups ------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """The ids of every consumer group (ListGroups on every broker)."""
        from client.groups import list_groups

        return sorted(g["group_id"] for g in self._run(list_groups))

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The group's committed offsets: {(topic, partition): offset}."""
        from client.groups import committed_offsets

        return self._run(committed_offsets, group)

    def lag(self, group: str, topic: str) -> dict[int, int]:
        """{partition: high watermark - committed offset} (the whole partition when nothing is committed)."""
        committed = self.committed(group)
        return {p: end - max(committed.get((topic, p), 0), 0) for p, end in self.end_offsets(topic).items()}


async def _wait_everywhere(cluster: Cluster, topic: str, done, timeout_s: float = 30.0) -> None:
    """Until every registered broker's own Metadata answer satisfies `done(partitions or None)`,
    with every partition led, so no client is sent to a broker that has not heard yet."""
    with trio.fail_after(timeout_s):
        while True:
            md = await cluster.refresh_metadata([])
            ready = True
            for broker_id in md.brokers:
                conn = await cluster.broker_connection(broker_id)
                r = await conn.request(
                    ApiKey.METADATA, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
                )
                found = [t for t in r.topics if t.name == topic and t.error_code == ErrorCode.NONE]
                parts = {p.partition_index: p for p in found[0].partitions} if found else None
                if not done(parts) or (parts is not None and any(p.leader_id < 0 for p in parts.values())):
                    ready = False
                    break
            if ready:
                return
            await trio.sleep(0.05)
