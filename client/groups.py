"""Consumer groups from the client side: finding a group's coordinator (FindCoordinator, key 10),
the admin calls `kafka-consumer-groups.sh` makes (ListGroups 16 on every broker, DescribeGroups
15, DeleteGroups 42, OffsetFetch 9, OffsetCommit 8 as a "simple" commit, OffsetDelete 47), and
`GroupMember`: membership of a group with the classic protocol (JoinGroup 11 with KIP-394's
member id round, SyncGroup 14 running the group's chosen assignor when this member leads —
"range" or "cooperative-sticky", `client/assignors.py` —, Heartbeat 12, LeaveGroup 13) and
commits of its positions. With cooperative-sticky (KIP-429) a member keeps its partitions through
a rebalance; partitions taken away from it are revoked after the SyncGroup and it rejoins at once
(`rejoin_needed`), so their new owner gets them in the next generation.

Retriable errors (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, a
broken connection) re-find the coordinator through `Cluster.retry`; the others raise KafkaError.
"""

from __future__ import annotations

import trio

from client.assignors import ASSIGNORS, Subscription
from client.cluster import Cluster, KafkaError
from client.connection import Connection
from client.reads import list_offset
from protocol import consumer_protocol as cp
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

REJOIN = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}


async def coordinator_connection(
    cluster: Cluster, group_id: str, refresh: bool = False, key_type: int = 0
) -> Connection:
    """A connection to `group_id`'s coordinator (FindCoordinator v3, key type 0), or with
    `key_type` 1 to a transactional id's."""
    await cluster.refresh_metadata([])  # the brokers' addresses
    conn = await cluster.any_connection()
    r = await conn.request(ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": key_type}, version=3)
    if r.error_code != ErrorCode.NONE:
        raise KafkaError(r.error_code, f"finding the coordinator of group {group_id}")
    return await cluster.connect(r.host, r.port)


async def _on_coordinator(cluster: Cluster, group_id: str, api_key: int, body: dict, check, version=None):
    """Send to the coordinator, retrying coordinator errors; `check(response)` raises KafkaError."""

    async def attempt(refresh: bool):
        conn = await coordinator_connection(cluster, group_id, refresh)
        response = await conn.request(api_key, body, version=version)
        check(response)
        return response

    return await cluster.retry(attempt, ApiKey(api_key).name)


def _raise(code: int, where: str) -> None:
    if code != ErrorCode.NONE:
        raise KafkaError(code, where)


# ---- admin -------------------------------------------------------------------------------------
async def list_groups(cluster: Cluster) -> list[dict]:
    """Every broker's groups (ListGroups v5): [{group_id, protocol_type, group_state, group_type}]."""
    md = await cluster.refresh_metadata([])
    out = []
    for broker_id in sorted(md.brokers):
        conn = await cluster.broker_connection(broker_id)
        r = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []}, version=5)
        _raise(r.error_code, f"ListGroups on broker {broker_id}")
        out += [dict(g) for g in r.groups]
    return sorted(out, key=lambda g: g["group_id"])


async def describe_group(cluster: Cluster, group_id: str) -> dict:
    """One group: its type ("classic" or "consumer"), state, protocol, members (with decoded
    assignments). A consumer group (KIP-848) is described by ConsumerGroupDescribe v0: its group
    and assignment epochs, assignor, and per member its epoch, current and target assignment; a
    classic group by DescribeGroups v5."""
    consumer = await _describe_consumer_group(cluster, group_id)
    if consumer is not None:
        return consumer
    r = await _on_coordinator(
        cluster,
        group_id,
        ApiKey.DESCRIBE_GROUPS,
        {"groups": [group_id]},
        lambda r: _raise(r.groups[0].error_code, f"describing group {group_id}"),
    )
    g = r.groups[0]
    members = []
    for m in g.members:
        try:
            assignment = cp.decode_assignment(bytes(m.member_assignment)) if g.protocol_type == "consumer" else {}
        except ValueError:
            assignment = {}
        members.append(
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": assignment,
            }
        )
    return {
        "group_id": g.group_id,
        "type": "classic",
        "state": g.group_state,
        "protocol_type": g.protocol_type,
        "protocol": g.protocol_data,
        "members": members,
    }


async def _describe_consumer_group(cluster: Cluster, group_id: str) -> dict | None:
    """ConsumerGroupDescribe v0 of one group; None when it is not a consumer group (or the
    brokers do not serve the API)."""
    await cluster.refresh_metadata([])
    conn = await cluster.any_connection()
    if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.api_versions:
        return None

    def check(r):
        code = r.groups[0].error_code
        if code != ErrorCode.GROUP_ID_NOT_FOUND:
            _raise(code, f"describing group {group_id}")

    r = await _on_coordinator(
        cluster,
        group_id,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
        {"group_ids": [group_id], "include_authorized_operations": False},
        check,
        version=0,
    )
    g = r.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None

    def names(assignment) -> dict[str, list[int]]:
        return {tp.topic_name: sorted(tp.partitions) for tp in assignment.topic_partitions}

    return {
        "group_id": g.group_id,
        "type": "consumer",
        "state": g.group_state,
        "protocol_type": "consumer",
        "protocol": g.assignor_name,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "assignment": names(m.assignment),
                "target_assignment": names(m.target_assignment),
            }
            for m in g.members
        ],
    }


async def delete_group(cluster: Cluster, group_id: str) -> None:
    """DeleteGroups v2; raises KafkaError (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ...)."""
    await _on_coordinator(
        cluster,
        group_id,
        ApiKey.DELETE_GROUPS,
        {"groups_names": [group_id]},
        lambda r: _raise(r.results[0].error_code, f"deleting group {group_id}"),
    )


async def committed_offsets(cluster: Cluster, group_id: str, require_stable: bool = False) -> dict[TopicPartition, int]:
    """All the group's committed offsets (OffsetFetch v7, topics null); with `require_stable`
    (KIP-447) a partition with offsets pending in an open transaction answers
    UNSTABLE_OFFSET_COMMIT, which is retried until the transaction completes."""

    def check(r):
        _raise(r.error_code, f"fetching the offsets of group {group_id}")
        for t in r.topics:
            for p in t.partitions:
                _raise(p.error_code, f"fetching the offset of group {group_id} for {t.name}-{p.partition_index}")

    r = await _on_coordinator(
        cluster,
        group_id,
        ApiKey.OFFSET_FETCH,
        {"group_id": group_id, "topics": None, "require_stable": require_stable},
        check,
        version=7,
    )
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


def _commit_body(
    group_id: str,
    offsets: dict[TopicPartition, int],
    generation: int,
    member_id: str,
    group_instance_id: str | None = None,
) -> dict:
    """An OffsetCommit body; `generation` is the member epoch for a consumer group (v9)."""
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_leader_epoch": -1}
        )
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": group_instance_id,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def _check_commit(r) -> None:
    for t in r.topics:
        for p in t.partitions:
            _raise(p.error_code, f"OffsetCommit {t.name}-{p.partition_index}")


async def commit_offsets(cluster: Cluster, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """A "simple" commit (generation -1): accepted only while the group has no members."""
    await _on_coordinator(
        cluster, group_id, ApiKey.OFFSET_COMMIT, _commit_body(group_id, offsets, -1, ""), _check_commit, version=8
    )


async def delete_offsets(cluster: Cluster, group_id: str, partitions: list[TopicPartition]) -> None:
    """OffsetDelete v0; raises KafkaError (GROUP_SUBSCRIBED_TO_TOPIC, GROUP_ID_NOT_FOUND, ...)."""
    topics: dict[str, list] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append({"partition_index": partition})

    def check(r):
        _raise(r.error_code, f"deleting offsets of group {group_id}")
        for t in r.topics:
            for p in t.partitions:
                _raise(p.error_code, f"deleting the offset of group {group_id} for {t.name}-{p.partition_index}")

    body = {"group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    await _on_coordinator(cluster, group_id, ApiKey.OFFSET_DELETE, body, check)


# ---- membership --------------------------------------------------------------------------------
async def starting_positions(
    cluster: Cluster, group_id: str, topic: str, partitions: list[int], reset: int
) -> dict[int, int]:
    """Where a member reads each of its `partitions` of `topic`: the group's committed offset,
    else ListOffsets at `reset` (EARLIEST or LATEST, as a consumer's auto.offset.reset)."""
    committed = await committed_offsets(cluster, group_id)
    positions = {}
    for p in partitions:
        found = committed.get((topic, p), -1)
        positions[p] = found if found >= 0 else await list_offset(cluster, topic, p, reset)
    return positions


class GroupMember:
    """One member of a consumer group (classic protocol). Timeouts in ms; `assignors` in order of
    preference (the group votes, as Kafka's brokers count them).

    `join()` returns this generation's assignment {topic: [partitions]}; `heartbeat()` returns
    False when the member must rejoin; `commit()` commits positions for the current generation
    (False when it must rejoin first); `leave()` leaves the group."""

    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        topics: list[str],
        *,
        session_timeout_ms: int = 10000,
        rebalance_timeout_ms: int = 30000,
        client_id: str = "minikafka-consumer",
        assignors: tuple[str, ...] = ("range",),
    ):
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(f"unknown assignor(s) {unknown}: choose from {sorted(ASSIGNORS)}")
        self.assignors = assignors
        self.rejoin_needed = False  # cooperative: partitions were revoked, rejoin at once
        self.protocol: str | None = None
        self.cluster, self.group_id, self.topics = cluster, group_id, topics
        self.session_timeout_ms, self.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self.assignment: dict[str, list[int]] = {}

    async def _coordinator(self, refresh: bool = False) -> Connection:
        return await coordinator_connection(self.cluster, self.group_id, refresh)

    async def join(self) -> dict[str, list[int]]:
        async def once(conn: Connection) -> dict[str, list[int]] | None:
            """One JoinGroup + SyncGroup round; None when the group asks for another."""
            while True:
                r = await conn.request(
                    ApiKey.JOIN_GROUP,
                    {
                        "group_id": self.group_id,
                        "session_timeout_ms": self.session_timeout_ms,
                        "rebalance_timeout_ms": self.rebalance_timeout_ms,
                        "member_id": self.member_id,
                        "group_instance_id": None,
                        "protocol_type": "consumer",
                        "protocols": [
                            {
                                "name": name,
                                "metadata": cp.encode_subscription(self.topics, owned=self.assignment, version=1),
                            }
                            for name in self.assignors
                        ],
                    },
                    version=7,
                    timeout_s=self.rebalance_timeout_ms / 1000 + 10,
                )
                if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                    self.member_id = r.member_id
                    continue
                if r.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self._lost()
                    continue
                _raise(r.error_code, f"joining group {self.group_id}")
                break
            self.generation, self.protocol = r.generation_id, r.protocol_name
            assignments = []
            if r.leader == self.member_id:
                subscriptions = {
                    m.member_id: Subscription(*cp.decode_subscription(bytes(m.metadata))) for m in r.members
                }
                wanted = sorted({t for s in subscriptions.values() for t in s.topics})
                md = await self.cluster.refresh_metadata(wanted)
                partitions = {t: sorted(md.topics.get(t, {})) for t in wanted}
                plan = ASSIGNORS[r.protocol_name](subscriptions, partitions)
                assignments = [{"member_id": m, "assignment": cp.encode_assignment(a)} for m, a in plan.items()]
            s = await conn.request(
                ApiKey.SYNC_GROUP,
                {
                    "group_id": self.group_id,
                    "generation_id": self.generation,
                    "member_id": self.member_id,
                    "group_instance_id": None,
                    "protocol_type": "consumer",
                    "protocol_name": self.protocol,
                    "assignments": assignments,
                },
                version=5,
                timeout_s=self.rebalance_timeout_ms / 1000 + 10,
            )
            if s.error_code in REJOIN:
                if s.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                    self._lost()
                return None
            _raise(s.error_code, f"syncing group {self.group_id}")
            new = cp.decode_assignment(bytes(s.assignment))
            owned = {(t, p) for t, ps in self.assignment.items() for p in ps}
            kept = {(t, p) for t, ps in new.items() for p in ps}
            self.rejoin_needed = self.protocol == "cooperative-sticky" and bool(owned - kept)
            self.assignment = new
            return self.assignment

        async def attempt(refresh: bool) -> dict[str, list[int]]:
            conn = await self._coordinator(refresh)
            while (assignment := await once(conn)) is None:
                pass
            return assignment

        return await self.cluster.retry(attempt, "JoinGroup")

    async def heartbeat(self) -> bool:
        conn = await self._coordinator()
        r = await conn.request(
            ApiKey.HEARTBEAT,
            {"group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id},
            version=4,
        )
        if r.error_code in REJOIN:
            if r.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                self._lost()
            return False
        _raise(r.error_code, f"heartbeat to group {self.group_id}")
        return True

    def _lost(self) -> None:
        """Fenced out of the group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION): the partitions are
        lost, not revoked, and the member rejoins owning nothing (with a new id when unknown)."""
        self.assignment = {}
        self.member_id = ""

    async def committed(self) -> dict[TopicPartition, int]:
        return await committed_offsets(self.cluster, self.group_id)

    async def starting_positions(self, topic: str, reset: int) -> dict[int, int]:
        return await starting_positions(self.cluster, self.group_id, topic, self.assignment.get(topic, []), reset)

    async def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        if not offsets:
            return True
        conn = await self._coordinator()
        r = await conn.request(
            ApiKey.OFFSET_COMMIT, _commit_body(self.group_id, offsets, self.generation, self.member_id), version=8
        )
        codes = {p.error_code for t in r.topics for p in t.partitions}
        if codes & REJOIN:
            if codes & (REJOIN - {ErrorCode.REBALANCE_IN_PROGRESS}):
                self._lost()
            return False
        for code in codes:
            _raise(code, f"committing offsets of group {self.group_id}")
        return True

    async def leave(self) -> None:
        with trio.move_on_after(5):
            try:
                conn = await self._coordinator()
                await conn.request(
                    ApiKey.LEAVE_GROUP,
                    {"group_id": self.group_id, "members": [{"member_id": self.member_id, "group_instance_id": None}]},
                    version=4,
                )
            except Exception:
                pass  # the session timeout removes us anyway
