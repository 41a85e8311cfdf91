"""The latest offsets of partitions, wherever their leaders are (Kafka's `PartitionMetadataClient`,
which KIP-1226 gives the group coordinator to compute a share group's lag).

`latest_offsets(partitions, read_committed)` answers each partition's high watermark (with
`read_committed`, its last stable offset): read from the replica when this broker leads the
partition, else asked of its leader with one ListOffsets (key 2) v7 request per leader
(timestamp -1, LATEST), the leaders asked at once on the inter-broker listener. A partition
without a leader, whose leader answers an error, or does not answer within `TIMEOUT_S`, is left
out of the answer: the caller reports its lag as unknown (-1). Nothing raises.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import trio

from client.connection import Connection, ConnectionClosed
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, ProtocolError
from protocol.topic_partition import TopicPartition

log = logging.getLogger(__name__)
TIMEOUT_S = 5.0
LATEST = -1  # ListOffsets' timestamp for the latest offset
LIST_OFFSETS_VERSION = 7


class PartitionMetadataClient:
    def __init__(self, broker_id: int, metadata_cache, replica_manager, client_id: str, security=None) -> None:
        """`security`: the inter-broker listener's client security (None: PLAINTEXT)."""
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.client_id = client_id
        self.security = security

    async def latest_offsets(
        self, partitions: Iterable[TopicPartition], read_committed: bool
    ) -> dict[TopicPartition, int]:
        """topic-partition -> its latest offset (see the module docstring); partitions whose
        offset could not be learnt are absent."""
        found: dict[TopicPartition, int] = {}
        remote: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            state = self.metadata_cache.get_partition(*tp)
            if state is None or state.leader < 0:
                continue
            if state.leader == self.broker_id:
                hosted = self.replica_manager.partitions.get(tp)
                if hosted is not None and hosted.is_leader:
                    found[tp] = hosted.last_stable_offset if read_committed else hosted.high_watermark
                continue
            remote.setdefault(state.leader, []).append(tp)
        if remote:
            async with trio.open_nursery() as nursery:
                for leader, tps in remote.items():
                    nursery.start_soon(self._ask, leader, tps, read_committed, found)
        return found

    async def _ask(self, leader: int, tps: list[TopicPartition], read_committed: bool, found: dict) -> None:
        broker = self.metadata_cache.brokers.get(leader)
        if broker is None:
            return
        by_topic: dict[str, list[dict]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": LATEST}
            )
        body = {
            "replica_id": -1,
            "isolation_level": 1 if read_committed else 0,
            "topics": [{"name": t, "partitions": p} for t, p in by_topic.items()],
        }
        try:
            with trio.fail_after(TIMEOUT_S):
                async with Connection.open(
                    broker.host, broker.port, client_id=self.client_id, security=self.security
                ) as conn:
                    r = await conn.request(ApiKey.LIST_OFFSETS, body, version=LIST_OFFSETS_VERSION)
        except (ConnectionClosed, ProtocolError, OSError, trio.TooSlowError) as e:
            log.info("no latest offsets from broker %d: %s", leader, e)
            return
        for t in r.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.NONE and p.offset >= 0:
                    found[(t.name, p.partition_index)] = p.offset
