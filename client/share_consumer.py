"""One member of a share group (KIP-932), as `minikafka consume --share-group` uses it: the
broker assigns (ShareGroupHeartbeat, key 76 v1, to the group coordinator, every
`heartbeat_interval_s`), records are acquired from each assigned partition's leader (ShareFetch,
key 78 v1, in one share session per leader: epoch 0 opens it with every partition, later
requests add and forget partitions and carry the acknowledgements of the records delivered
since), and `close()` acknowledges what is left (ShareAcknowledge, key 79 v1, epoch -1 closes the
session) and leaves the group (epoch -1).

`poll()` returns `Delivered` records: each must be acknowledged once (`acknowledge`: ACCEPT,
RELEASE or REJECT); offsets of an acquired range that carry no record (control records, gaps)
are acknowledged as GAP by the member itself. A record delivered but not acknowledged by
`close()` is released. A leader's error (NOT_LEADER_OR_FOLLOWER, ...) or a session error drops
that leader's session (its unsent acknowledgements too: those records come back when their
lock runs out, as share groups promise) and refreshes the metadata; FENCED_MEMBER_EPOCH /
UNKNOWN_MEMBER_ID rejoin with epoch 0.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

import trio

from client.cluster import Cluster, KafkaError
from client.connection import Connection, ConnectionClosed
from client.groups import _raise, coordinator_connection
from protocol import record_batch as rb
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicIdPartition

log = logging.getLogger(__name__)

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3
FENCED = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}
SESSION_ERRORS = {ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH}


@dataclass(frozen=True)
class Delivered:
    topic: str
    partition: int
    record: rb.Record
    delivery_count: int


@dataclass
class _Session:
    """A share session with one leader: the epoch the next request carries and its partitions."""

    epoch: int = 0
    partitions: set[TopicIdPartition] = field(default_factory=set)


def ack_batches(acks: dict[int, int]) -> list[dict]:
    """offset -> acknowledge type as ShareFetch/ShareAcknowledge's AcknowledgementBatches: runs of
    consecutive offsets, one type for a run that has one, else one type per offset."""
    out: list[dict] = []
    run: list[int] = []
    for offset in sorted(acks):
        if run and offset != run[-1] + 1:
            out.append(_batch(run, acks))
            run = []
        run.append(offset)
    if run:
        out.append(_batch(run, acks))
    return out


def _batch(run: list[int], acks: dict[int, int]) -> dict:
    types = [acks[o] for o in run]
    return {
        "first_offset": run[0],
        "last_offset": run[-1],
        "acknowledge_types": types[:1] if len(set(types)) == 1 else types,
    }


class ShareMember:
    def __init__(self, cluster: Cluster, group_id: str, topics: list[str], *, client_id: str = "minikafka-share"):
        self.cluster, self.group_id, self.topics, self.client_id = cluster, group_id, topics, client_id
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self.heartbeat_interval_s = 5.0
        self.assignment: set[TopicIdPartition] = set()
        self._next_heartbeat = 0.0
        self._sessions: dict[int, _Session] = {}
        self._acks: dict[TopicIdPartition, dict[int, int]] = {}
        self._unacked: dict[TopicIdPartition, set[int]] = {}
        self._coordinator: Connection | None = None

    # ---- membership ------------------------------------------------------------------------------
    async def heartbeat(self, *, leaving: bool = False) -> None:
        """One ShareGroupHeartbeat (epoch -1 when `leaving`); raises KafkaError."""
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "member_epoch": -1 if leaving else self.member_epoch,
            "rack_id": None,
            "subscribed_topic_names": list(self.topics) if self.member_epoch == 0 and not leaving else None,
        }

        async def attempt(refresh: bool):
            if refresh or self._coordinator is None or self._coordinator.closed:
                self._coordinator = await coordinator_connection(self.cluster, self.group_id, refresh)
            r = await self._coordinator.request(ApiKey.SHARE_GROUP_HEARTBEAT, body, version=1)
            if r.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._coordinator = None
            if r.error_code not in FENCED or leaving:
                _raise(r.error_code, f"heartbeat to share group {self.group_id}: {r.error_message or ''}")
            return r

        r = await self.cluster.retry(attempt, "ShareGroupHeartbeat")
        if leaving:
            return
        if r.error_code in FENCED:
            log.info("share member %s of %s fenced (%s): rejoining", self.member_id, self.group_id, r.error_code)
            self.member_epoch, self.assignment = 0, set()
            return
        self.member_epoch = r.member_epoch
        self.heartbeat_interval_s = max(r.heartbeat_interval_ms, 100) / 1000
        if r.assignment is not None:
            self.assignment = {(t.topic_id, p) for t in r.assignment.topic_partitions for p in t.partitions}
            known = set(self.cluster.metadata.topic_ids.values())
            if any(t not in known for t, _ in self.assignment):
                await self.cluster.refresh_metadata(list(self.topics))

    def _name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, t in self.cluster.metadata.topic_ids.items() if t == topic_id), None)

    # ---- records ---------------------------------------------------------------------------------
    async def poll(self, max_records: int = 500, max_wait_ms: int = 500) -> list[Delivered]:
        """Heartbeat when due, then one ShareFetch to each leader of an assigned partition
        (carrying the acknowledgements made since): the records acquired, at most `max_records`."""
        if trio.current_time() >= self._next_heartbeat or self.member_epoch == 0:
            await self.heartbeat()
            self._next_heartbeat = trio.current_time() + self.heartbeat_interval_s
        by_leader: dict[int, set[TopicIdPartition]] = {}
        for key in self.assignment:
            name = self._name(key[0])
            info = self.cluster.metadata.topics.get(name or "", {}).get(key[1])
            if info is not None and info.leader >= 0:
                by_leader.setdefault(info.leader, set()).add(key)
        for leader in [b for b in self._sessions if b not in by_leader]:
            await self._close_session(leader)  # no partition of ours there any more
        out: list[Delivered] = []
        for leader, keys in sorted(by_leader.items()):
            if len(out) >= max_records:
                break
            out += await self._fetch(leader, keys, max_records - len(out), max_wait_ms // max(1, len(by_leader)))
        if not by_leader:
            await trio.sleep(max_wait_ms / 1000)
        return out

    def acknowledge(self, delivered: Delivered, ack_type: int) -> None:
        """ACCEPT, RELEASE or REJECT one delivered record (sent with the next request)."""
        topic_id = self.cluster.metadata.topic_ids[delivered.topic]
        key = (topic_id, delivered.partition)
        self._acks.setdefault(key, {})[delivered.record.offset] = ack_type
        self._unacked.get(key, set()).discard(delivered.record.offset)

    def _take_acks(self, keys: set[TopicIdPartition]) -> dict[TopicIdPartition, list[dict]]:
        return {k: ack_batches(self._acks.pop(k)) for k in sorted(keys, key=str) if self._acks.get(k)}

    async def _fetch(self, leader: int, keys: set[TopicIdPartition], max_records: int, max_wait_ms: int) -> list:
        session = self._sessions.setdefault(leader, _Session())
        acks = self._take_acks(keys | session.partitions)
        listed = (keys | set(acks)) if session.epoch == 0 else ((keys - session.partitions) | set(acks))
        forgotten = session.partitions - keys if session.epoch else set()
        topics: dict[uuid.UUID, list[dict]] = {}
        for topic_id, p in sorted(listed, key=str):
            topics.setdefault(topic_id, []).append(
                {"partition_index": p, "acknowledgement_batches": acks.get((topic_id, p), [])}
            )
        gone: dict[uuid.UUID, list[int]] = {}
        for topic_id, p in forgotten:
            gone.setdefault(topic_id, []).append(p)
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "share_session_epoch": session.epoch,
            "max_wait_ms": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": 8 << 20,
            "max_records": max_records,
            "batch_size": max_records,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic_id": t, "partitions": ps} for t, ps in gone.items()],
        }
        try:
            conn = await self.cluster.broker_connection(leader)
            r = await conn.request(ApiKey.SHARE_FETCH, body, version=1, timeout_s=max_wait_ms / 1000 + 30)
        except (ConnectionClosed, KafkaError) as e:
            log.info("ShareFetch to broker %d failed: %s", leader, e)
            return await self._lost(leader)
        if r.error_code != ErrorCode.NONE:
            log.info("ShareFetch to broker %d: %s", leader, ErrorCode(r.error_code).name)
            return await self._lost(leader)
        session.epoch = session.epoch + 1 if session.epoch < (1 << 31) - 1 else 1
        session.partitions = (session.partitions | keys) - forgotten
        out: list[Delivered] = []
        refresh = False
        for t in r.responses:
            name = self._name(t.topic_id)
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE or p.acknowledge_error_code != ErrorCode.NONE:
                    log.info(
                        "ShareFetch %s-%d: %s / %s", name, p.partition_index, p.error_code, p.acknowledge_error_code
                    )
                    refresh = refresh or p.error_code != ErrorCode.NONE
                if name is not None and p.acquired_records:
                    out += self._delivered(name, (t.topic_id, p.partition_index), p.records, p.acquired_records)
        if refresh:
            await self.cluster.refresh_metadata(list(self.topics))
        return out

    def _delivered(self, name: str, key: TopicIdPartition, data: bytes, acquired) -> list[Delivered]:
        counts = {}
        for a in acquired:
            for offset in range(a.first_offset, a.last_offset + 1):
                counts[offset] = a.delivery_count
        out = []
        for pos, header in rb.iter_batches(data or b""):
            if header.is_control:
                continue
            for record in rb.decode_records(data, pos, header):
                if record.offset in counts:
                    out.append(Delivered(name, key[1], record, counts.pop(record.offset)))
        for offset in counts:  # acquired, carrying no record
            self._acks.setdefault(key, {})[offset] = GAP
        self._unacked.setdefault(key, set()).update(d.record.offset for d in out)
        return out

    async def _lost(self, leader: int) -> list:
        session = self._sessions.pop(leader, None)
        for key in session.partitions if session is not None else ():
            self._acks.pop(key, None)
        await self.cluster.refresh_metadata(list(self.topics))
        return []

    async def _close_session(self, leader: int) -> None:
        """ShareAcknowledge with epoch -1: the session's last acknowledgements, and it closes (the
        leader releases whatever else the member holds there)."""
        session = self._sessions.pop(leader, None)
        if session is None or session.epoch == 0:
            return
        acks = self._take_acks(session.partitions)
        topics: dict[uuid.UUID, list[dict]] = {}
        for (topic_id, p), batches in acks.items():
            topics.setdefault(topic_id, []).append({"partition_index": p, "acknowledgement_batches": batches})
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "share_session_epoch": -1,
            "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
        }
        try:
            conn = await self.cluster.broker_connection(leader)
            r = await conn.request(ApiKey.SHARE_ACKNOWLEDGE, body, version=1)
            if r.error_code != ErrorCode.NONE:
                log.info("closing the share session with broker %d: %s", leader, ErrorCode(r.error_code).name)
        except (ConnectionClosed, KafkaError) as e:
            log.info("closing the share session with broker %d: %s", leader, e)

    async def close(self) -> None:
        """Release what was delivered and not acknowledged, send the last acknowledgements,
        close every share session, and leave the group."""
        for key, offsets in self._unacked.items():
            for offset in offsets:
                self._acks.setdefault(key, {}).setdefault(offset, RELEASE)
        self._unacked.clear()
        for leader in list(self._sessions):
            await self._close_session(leader)
        if self.member_epoch > 0:
            try:
                await self.heartbeat(leaving=True)
            except (KafkaError, ConnectionClosed) as e:
                log.info("leaving share group %s: %s", self.group_id, e)
