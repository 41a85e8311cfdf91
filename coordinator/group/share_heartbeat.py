"""ShareGroupHeartbeat (API key 76, KIP-932) decided as a pure function: from a share group, a
request and the cluster's topics to the records to write and the answer to give (Kafka's
`GroupMetadataManager.shareGroupHeartbeat`). Nothing here changes the group: the shell writes
the records through the runtime and replays them onto it.

One heartbeat:
1. validates the request (INVALID_REQUEST with Kafka's messages: an empty member, group or rack
   id, a join without subscribed topics, an epoch below -1);
2. handles a leave (epoch -1: the member's records are deleted and the group epoch bumped;
   UNKNOWN_MEMBER_ID for a member the group does not have);
3. finds the member: epoch 0 joins (GROUP_MAX_SIZE_REACHED past `group.share.max.size`);
   otherwise the member must exist (UNKNOWN_MEMBER_ID) at the epoch it sends, or the one before
   when the answer that bumped it was lost (FENCED_MEMBER_EPOCH);
4. bumps the group epoch when its membership, a subscription or the subscribed topics'
   partitions changed, and then computes a new target assignment (`share_assignor`); the
   partitions it assigns for the first time join the group's state partitions (record 15);
5. gives the member its target at once (share members never revoke first): a new member epoch,
   and the assignment in the answer when it joined or its partitions changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace

from coordinator.group import share_assignor
from coordinator.group import share_records as sr
from coordinator.group.consumer_heartbeat import HeartbeatError
from coordinator.group.consumer_records import Assignment, TopicMetadata
from coordinator.group.share_group import JOIN_EPOCH, LEAVE_EPOCH, ShareGroup, ShareMember
from coordinator.group.share_records import GroupEpoch, ShareMemberMetadata, ShareRecord
from protocol.errors import ErrorCode


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatOutcome:
    """The records to write and the answer: the member's epoch (-1 after a leave) and its
    assignment, None when the answer carries none (unchanged)."""

    records: list[ShareRecord]
    member_id: str
    member_epoch: int
    assignment: Assignment | None = None


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate(req: ShareHeartbeatRequest) -> None:
    """Raises HeartbeatError(INVALID_REQUEST) with Kafka's message."""
    if _blank(req.member_id) or not req.member_id:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if _blank(req.group_id) or not req.group_id:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if _blank(req.rack_id):
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def metadata_hash(names: set[str], topics: Mapping[str, TopicMetadata]) -> int:
    """A hash (int64) of the id and partition count of each subscribed topic the cluster has:
    it changes when one is created, deleted, recreated or grows."""
    found = sorted((n, str(topics[n].topic_id), topics[n].num_partitions) for n in names if n in topics)
    if not found:
        return 0
    digest = hashlib.blake2b(repr(found).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def leave(group: ShareGroup, member_id: str) -> ShareHeartbeatOutcome:
    """Epoch -1: the member's records go and the group epoch is bumped."""
    if member_id not in group.members:
        raise HeartbeatError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
        )
    records = group.member_tombstones(member_id)
    records.append(
        ShareRecord(sr.GROUP_EPOCH, group.group_id, None, GroupEpoch(group.group_epoch + 1, group.metadata_hash))
    )
    return ShareHeartbeatOutcome(records, member_id, LEAVE_EPOCH)


def _member(group: ShareGroup, req: ShareHeartbeatRequest, max_size: int) -> ShareMember:
    member = group.members.get(req.member_id)
    if member is None:
        if req.member_epoch != JOIN_EPOCH:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        if len(group.members) >= max_size:
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {max_size} members.",
            )
        return ShareMember(req.member_id)
    if req.member_epoch > member.member_epoch or (
        req.member_epoch < member.member_epoch and req.member_epoch != member.previous_member_epoch
    ):
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a {'greater' if req.member_epoch > member.member_epoch else 'smaller'} "
            f"member epoch ({req.member_epoch}) than the one known by the group coordinator "
            f"({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    return member


def _assigned(target: Mapping[str, Assignment], topics: Mapping[str, TopicMetadata]) -> sr.TopicPartitions:
    """The topic-partitions `target` assigns, with their topics' names."""
    names = {t.topic_id: t.name for t in topics.values()}
    out: dict = {}
    for assignment in target.values():
        for topic_id, parts in assignment.items():
            if parts and topic_id in names:
                out[topic_id] = out.get(topic_id, frozenset()) | frozenset(parts)
    return {t: (names[t], parts) for t, parts in out.items()}


def heartbeat(
    group: ShareGroup, req: ShareHeartbeatRequest, topics: Mapping[str, TopicMetadata], max_size: int
) -> ShareHeartbeatOutcome:
    """One ShareGroupHeartbeat against `group` (a new, empty one when the id is unknown) and the
    cluster's `topics` by name. Raises HeartbeatError with the answer's error and message."""
    validate(req)
    if req.member_epoch == LEAVE_EPOCH:
        return leave(group, req.member_id)
    member = _member(group, req, max_size)
    records: list[ShareRecord] = []
    metadata = ShareMemberMetadata(
        req.rack_id if req.rack_id is not None else member.metadata.rack_id,
        req.client_id,
        req.client_host,
        req.subscribed_topic_names
        if req.subscribed_topic_names is not None
        else member.metadata.subscribed_topic_names,
    )
    new_member = req.member_id not in group.members
    bump = new_member
    if new_member or metadata != member.metadata:
        records.append(ShareRecord(sr.MEMBER_METADATA, group.group_id, req.member_id, metadata))
        bump = bump or metadata.subscribed_topic_names != member.metadata.subscribed_topic_names
    members = dict(group.members)
    members[req.member_id] = replace(member, metadata=metadata)
    names = {n for m in members.values() for n in m.metadata.subscribed_topic_names}
    hashed = metadata_hash(names, topics)
    group_epoch = group.group_epoch
    if bump or hashed != group.metadata_hash or not group.exists:
        group_epoch += 1
        records.append(ShareRecord(sr.GROUP_EPOCH, group.group_id, None, GroupEpoch(group_epoch, hashed)))
    target = group.target
    if group_epoch > group.assignment_epoch:
        target = share_assignor.assign(
            {
                m: {topics[n].topic_id for n in mm.metadata.subscribed_topic_names if n in topics}
                for m, mm in members.items()
            },
            {t.topic_id: t.num_partitions for t in topics.values() if t.name in names},
            {m: a for m, a in group.target.items() if m in members},
        )
        for member_id, assignment in sorted(target.items()):
            if group.target.get(member_id) != assignment:
                records.append(ShareRecord(sr.TARGET_ASSIGNMENT_MEMBER, group.group_id, member_id, assignment))
        records.append(ShareRecord(sr.TARGET_ASSIGNMENT_METADATA, group.group_id, None, group_epoch))
        assignment_epoch = group_epoch
        initialized = group.with_initialized(_assigned(target, topics))
        if initialized is not None:
            records.append(group.state_partitions_record(initialized))
    else:
        assignment_epoch = group.assignment_epoch
    mine = target.get(req.member_id, {})
    epoch = member.member_epoch
    if member.member_epoch != assignment_epoch or member.assigned != mine or new_member:
        epoch = assignment_epoch
        reconciled = ShareMember(req.member_id, metadata, assignment_epoch, member.member_epoch, mine)
        records.append(group.current_record(reconciled))
    changed = new_member or req.member_epoch == JOIN_EPOCH or member.assigned != mine
    return ShareHeartbeatOutcome(records, req.member_id, epoch, mine if changed else None)
