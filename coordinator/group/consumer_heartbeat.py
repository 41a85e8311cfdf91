"""ConsumerGroupHeartbeat (API key 68, KIP-848) decided as a pure function: from a group, a request
and the cluster's topics to the records to write and the answer to give (Kafka's
`GroupMetadataManager.consumerGroupHeartbeat` and `CurrentAssignmentBuilder`). Nothing here
changes the group's state (only its subscription memo, `ConsumerGroup.subscription_checked`): the
shell appends the records and replays them onto it.

One heartbeat:
1. validates the request (INVALID_REQUEST with a message, UNSUPPORTED_ASSIGNOR,
   INVALID_REGULAR_EXPRESSION), then handles a leave (epoch -1: the member's records are deleted
   and the group epoch bumped; epoch -2, a static member's temporary leave: it keeps its
   partitions under epoch -2 until its session expires or its instance rejoins);
2. finds the member: epoch 0 joins (a new member id unless the client brought one;
   GROUP_MAX_SIZE_REACHED past `group.consumer.max.size`; a static member whose instance id is
   held by a live member is UNRELEASED_INSTANCE_ID, one that left with -2 takes its place and its
   partitions); otherwise the member must exist (UNKNOWN_MEMBER_ID) at the epoch it sends
   (FENCED_MEMBER_EPOCH, except the previous epoch when it owns no more than it was given: a lost
   answer);
3. bumps the group epoch when membership, a subscription, the assignor or the subscribed topics
   (names, regex matches, partition counts) changed, and then computes a new target assignment
   with the group's assignor;
4. reconciles the member toward its target: partitions it must give up first go to
   `pending_revocation` and its epoch stays until it reports (in `TopicPartitions`) that it no
   longer owns them; a partition still owned by another member is withheld (UNRELEASED_PARTITIONS)
   until released.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from coordinator.group import consumer_records as cr
from coordinator.group.assignors import ASSIGNORS, MemberSubscription
from coordinator.group.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    partitions_of,
)
from coordinator.group.consumer_records import (
    Assignment,
    ClassicMetadata,
    ConsumerRecord,
    MemberMetadata,
    TopicMetadata,
)
from protocol.errors import ErrorCode, KafkaError

#: Kafka 4's code for a regex RE2/J refuses (not in 3.8's table)
_REGEX_CACHE: dict[str, re.Pattern | None] = {}
#: what Python's re accepts and RE2/J refuses: lookaround, backreferences, atomic groups
_RE2_UNSUPPORTED = re.compile(r"\(\?[=!>]|\(\?<[=!]|\\[1-9]|\(\?P=")


@dataclass(frozen=True)
class ConsumerGroupLimits:
    """The broker keys a heartbeat reads (ms; `assignors` by name, the first the default)."""

    heartbeat_interval_ms: int
    session_timeout_ms: int
    max_size: int
    assignors: tuple[str, ...]


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    #: set for a classic member's JoinGroup in a consumer group (online migration)
    classic: ClassicMetadata | None = None


@dataclass
class HeartbeatOutcome:
    error: int = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Assignment | None = None
    records: list[ConsumerRecord] = field(default_factory=list)
    #: the member entered UNREVOKED_PARTITIONS with this epoch (its rebalance timeout starts)
    revoking: bool = False


class HeartbeatError(KafkaError):
    """A ConsumerGroupHeartbeat refused: `error_code`, and `message` for the response's
    ErrorMessage (None: the response carries none)."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name, error_code)
        self.message = message


def compile_regex(pattern: str) -> re.Pattern:
    """A subscription regex as the broker evaluates it (full match, RE2/J's syntax: no
    backreferences, lookaround or atomic groups). Raises HeartbeatError(INVALID_REGULAR_EXPRESSION)."""
    if pattern in _REGEX_CACHE:
        found = _REGEX_CACHE[pattern]
    else:
        try:
            found = None if _RE2_UNSUPPORTED.search(pattern) else re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            found = None
        if len(_REGEX_CACHE) > 10_000:
            _REGEX_CACHE.clear()
        _REGEX_CACHE[pattern] = found
    if found is None:
        raise HeartbeatError(
            ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {pattern!r} is not a valid RE2/J pattern"
        )
    return found


def subscribed_names(metadata: MemberMetadata, topics: Mapping[str, TopicMetadata]) -> set[str]:
    names = {n for n in metadata.subscribed_topic_names if n in topics}
    if metadata.subscribed_topic_regex:
        pattern = compile_regex(metadata.subscribed_topic_regex)
        names |= {n for n in topics if pattern.fullmatch(n)}
    return names


# ---- validation --------------------------------------------------------------------------------
def validate(req: HeartbeatRequest, limits: ConsumerGroupLimits) -> None:
    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    if req.instance_id is not None and not req.instance_id:
        raise invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise invalid("RackId can't be empty.")
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or partitions_of(req.owned):
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif req.member_epoch == STATIC_LEAVE_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch is invalid: {req.member_epoch}.")
    elif not req.member_id:
        raise invalid("MemberId can't be empty.")
    if req.server_assignor is not None and req.server_assignor not in limits.assignors:
        raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported.")
    if req.subscribed_topic_regex:
        compile_regex(req.subscribed_topic_regex)


# ---- leaving and fencing -----------------------------------------------------------------------
def remove_member(group: ConsumerGroup, member_id: str, topics: Mapping[str, TopicMetadata]) -> list[ConsumerRecord]:
    """The records that remove a member (a leave, an expired session, a missed rebalance
    timeout): its tombstones, the new subscribed topics if they changed, a bumped group epoch."""
    records = group.member_tombstones(member_id)
    others = [m.metadata for mid, m in group.members.items() if mid != member_id]
    metadata = _subscription_metadata(others, topics)
    if metadata != group.subscription_metadata:
        records.append(ConsumerRecord(cr.SUBSCRIPTION_METADATA, group.group_id, value=metadata))
    records.append(ConsumerRecord(cr.GROUP_EPOCH, group.group_id, value=group.group_epoch + 1))
    return records


def _subscription_metadata(members, topics: Mapping[str, TopicMetadata]) -> dict[str, TopicMetadata]:
    names: set[str] = set()
    for metadata in members:
        names |= subscribed_names(metadata, topics)
    return {n: topics[n] for n in names}


def _leave(group: ConsumerGroup, req: HeartbeatRequest, topics) -> HeartbeatOutcome:
    if req.member_epoch == STATIC_LEAVE_EPOCH:
        member_id = group.static_members.get(req.instance_id or "")
        if member_id is None or member_id != req.member_id:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        member = group.members[member_id]
        current = replace(member.current_assignment(), member_epoch=STATIC_LEAVE_EPOCH)
        records = [ConsumerRecord(cr.CURRENT_ASSIGNMENT, group.group_id, member_id, current)]
        return HeartbeatOutcome(member_id=member_id, member_epoch=STATIC_LEAVE_EPOCH, records=records)
    if req.member_id not in group.members:
        raise HeartbeatError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
        )
    records = remove_member(group, req.member_id, topics)
    return HeartbeatOutcome(member_id=req.member_id, member_epoch=LEAVE_EPOCH, records=records)


# ---- the heartbeat -----------------------------------------------------------------------------
def heartbeat(
    group: ConsumerGroup,
    req: HeartbeatRequest,
    topics: Mapping[str, TopicMetadata],
    limits: ConsumerGroupLimits,
    new_member_id: str,
    *,
    defer_assignment: bool = False,
) -> HeartbeatOutcome:
    """Decide one heartbeat (see the module doc). `topics`: the cluster's topics a consumer may
    subscribe to, by name. `defer_assignment`: leave a new target to a later heartbeat (the
    shell sets it while more heartbeats of the group wait: a burst of joins computes one target,
    not one per join). Raises HeartbeatError for an answer that is only an error."""
    validate(req, limits)
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(group, req, topics)
    records: list[ConsumerRecord] = []
    replaced: str | None = None
    if req.member_epoch == JOIN_EPOCH:
        member, replaced = _joining_member(group, req, limits, new_member_id)
    else:
        member = _known_member(group, req)
    metadata = _updated_metadata(member.metadata, req)
    joined = member.member_id not in group.members or replaced is not None
    bump = joined and replaced is None  # a new member; a static one taking its place is not
    if replaced is not None:
        records += group.member_tombstones(replaced)
    if metadata != member.metadata or joined:
        records.append(ConsumerRecord(cr.MEMBER_METADATA, group.group_id, member.member_id, metadata))
        old = member.metadata
        if (
            old.subscribed_topic_names != metadata.subscribed_topic_names
            or old.subscribed_topic_regex != metadata.subscribed_topic_regex
            or old.server_assignor != metadata.server_assignor
        ):
            bump = True
    unchanged = not joined and metadata == member.metadata
    member = replace(member, metadata=metadata)
    if unchanged and group.subscription_checked(topics):
        subscription = group.subscription_metadata  # nobody's subscription nor the topics changed
    else:
        all_metadata = [m.metadata for mid, m in group.members.items() if mid not in (member.member_id, replaced)]
        all_metadata.append(metadata)
        subscription = _subscription_metadata(all_metadata, topics)
        if unchanged and subscription == group.subscription_metadata:
            group.subscription_checked(topics, mark=True)
    if subscription != group.subscription_metadata:
        records.append(ConsumerRecord(cr.SUBSCRIPTION_METADATA, group.group_id, value=subscription))
        bump = True
    group_epoch = group.group_epoch
    if bump or not group.exists:
        group_epoch += 1
        records.append(ConsumerRecord(cr.GROUP_EPOCH, group.group_id, value=group_epoch))

    # the target assignment
    target = dict(group.target)
    if replaced is not None and replaced in target:
        target[member.member_id] = target.pop(replaced)
        records.append(
            ConsumerRecord(cr.TARGET_ASSIGNMENT_MEMBER, group.group_id, member.member_id, target[member.member_id])
        )
    assignment_epoch = group.assignment_epoch
    if group_epoch > assignment_epoch and not (defer_assignment and group.members):
        members = {mid: m for mid, m in group.members.items() if mid not in (member.member_id, replaced)}
        members[member.member_id] = member
        new_target = _assign(members, target, subscription, assignor_of(members, limits.assignors))
        for mid in sorted(members):
            if new_target.get(mid, {}) != target.get(mid, {}) or mid not in group.target:
                records.append(
                    ConsumerRecord(cr.TARGET_ASSIGNMENT_MEMBER, group.group_id, mid, new_target.get(mid, {}))
                )
        target = new_target
        assignment_epoch = group_epoch
        records.append(ConsumerRecord(cr.TARGET_ASSIGNMENT_METADATA, group.group_id, value=assignment_epoch))

    # reconcile the member toward its target
    def owner(topic_id: uuid.UUID, partition: int) -> str | None:
        found = group.owner_of(topic_id, partition)
        return None if found in (member.member_id, replaced) else found

    reconciled = reconcile(member, target.get(member.member_id, {}), assignment_epoch, req.owned, owner)
    moved = reconciled.current_assignment() != member.current_assignment()
    if moved or joined:
        records.append(
            ConsumerRecord(cr.CURRENT_ASSIGNMENT, group.group_id, member.member_id, reconciled.current_assignment())
        )
    send_assignment = (
        req.member_epoch == JOIN_EPOCH
        or moved
        or (req.owned is not None and partitions_of(req.owned) != partitions_of(reconciled.assigned))
    )
    return HeartbeatOutcome(
        member_id=member.member_id,
        member_epoch=reconciled.member_epoch,
        assignment=dict(reconciled.assigned) if send_assignment else None,
        records=records,
        revoking=reconciled.state == MemberState.UNREVOKED_PARTITIONS and member.state != reconciled.state,
    )


def _joining_member(
    group: ConsumerGroup, req: HeartbeatRequest, limits: ConsumerGroupLimits, new_member_id: str
) -> tuple[ConsumerMember, str | None]:
    member_id = req.member_id or new_member_id
    if req.instance_id is not None:
        held_by = group.static_members.get(req.instance_id)
        if held_by is not None:
            old = group.members[held_by]
            # a classic static member restarts without leaving first: its new instance replaces it
            replaceable = old.member_epoch == STATIC_LEAVE_EPOCH or old.metadata.classic is not None
            if not replaceable:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {held_by} with instance id {req.instance_id} is not released yet.",
                )
            # the instance comes back: it takes the old member's place and partitions
            taken = replace(old, member_id=member_id, member_epoch=0, state=MemberState.STABLE, pending_revocation={})
            return taken, (None if member_id == held_by else held_by)
    existing = group.members.get(member_id)
    if existing is not None:
        # a member re-joining with its id (KIP-1082: client-generated ids): start over
        return replace(existing, member_epoch=0), None
    if len(group.members) >= limits.max_size:
        raise HeartbeatError(
            ErrorCode.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {limits.max_size} members.",
        )
    return ConsumerMember(member_id), None


def _known_member(group: ConsumerGroup, req: HeartbeatRequest) -> ConsumerMember:
    member = group.members.get(req.member_id)
    if member is None:
        raise HeartbeatError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
        )
    if req.member_epoch > member.member_epoch:
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).",
        )
    if req.member_epoch < member.member_epoch:
        lost_answer = (
            req.member_epoch == member.previous_member_epoch
            and req.owned is not None
            and partitions_of(req.owned) <= partitions_of(member.assigned)
        )
        if not lost_answer:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).",
            )
    return member


def _updated_metadata(old: MemberMetadata, req: HeartbeatRequest) -> MemberMetadata:
    return MemberMetadata(
        instance_id=req.instance_id if req.instance_id is not None else old.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else old.rack_id,
        client_id=req.client_id,
        client_host=req.client_host,
        subscribed_topic_names=(
            tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None
            else old.subscribed_topic_names
        ),
        # an empty regex clears it (KIP-848), null keeps it
        subscribed_topic_regex=(
            (req.subscribed_topic_regex or None)
            if req.subscribed_topic_regex is not None
            else old.subscribed_topic_regex
        ),
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else old.rebalance_timeout_ms,
        server_assignor=req.server_assignor if req.server_assignor is not None else old.server_assignor,
        classic=req.classic,
    )


def assignor_of(members: Mapping[str, ConsumerMember], assignors: tuple[str, ...] | list[str]) -> str:
    """The assignor most members ask for (Kafka: the most used), else the first configured."""
    asked: dict[str, int] = {}
    for m in members.values():
        if m.metadata.server_assignor:
            asked[m.metadata.server_assignor] = asked.get(m.metadata.server_assignor, 0) + 1
    if asked:
        return max(sorted(asked), key=lambda name: asked[name])
    return assignors[0]


def _assign(
    members: Mapping[str, ConsumerMember],
    target: Mapping[str, Assignment],
    subscription: Mapping[str, TopicMetadata],
    assignor: str,
) -> dict[str, Assignment]:
    topics = {t.topic_id: t.num_partitions for t in subscription.values()}
    specs = {}
    for mid, m in members.items():
        names = subscribed_names(m.metadata, subscription)
        specs[mid] = MemberSubscription(frozenset(subscription[n].topic_id for n in names), target.get(mid, {}))
    return ASSIGNORS[assignor](specs, topics)


# ---- reconciliation (Kafka's CurrentAssignmentBuilder) ---------------------------------------------
def reconcile(
    member: ConsumerMember, target: Assignment, target_epoch: int, owned: Assignment | None, owner
) -> ConsumerMember:
    """The member's next state toward `target` (of `target_epoch`). `owned`: the partitions the
    member reported (None: not reported); `owner(topic id, partition)`: another member holding it,
    or None."""
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        still_owned = owned is None or partitions_of(owned) & partitions_of(member.pending_revocation)
        if still_owned:
            return member
        return _next(replace(member, pending_revocation={}), target, target_epoch, owner)
    if member.state == MemberState.STABLE and member.member_epoch == target_epoch:
        return member
    return _next(member, target, target_epoch, owner)


def _next(member: ConsumerMember, target: Assignment, target_epoch: int, owner) -> ConsumerMember:
    current = member.assigned
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(current) | set(target):
        have, want = current.get(topic_id, frozenset()), target.get(topic_id, frozenset())
        keep_here = set(have & want)
        if have - want:
            revoke[topic_id] = frozenset(have - want)
        for p in want - have:
            if owner(topic_id, p) is None:
                keep_here.add(p)
            else:
                unreleased = True
        if keep_here:
            keep[topic_id] = keep_here
    if revoke:
        assigned = {t: frozenset(ps & current.get(t, frozenset())) for t, ps in keep.items()}
        assigned = {t: ps for t, ps in assigned.items() if ps}
        return replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            previous_member_epoch=member.member_epoch,
            assigned=assigned,
            pending_revocation=revoke,
        )
    return replace(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        previous_member_epoch=member.member_epoch
        if member.member_epoch != target_epoch
        else member.previous_member_epoch,
        member_epoch=target_epoch,
        assigned={t: frozenset(ps) for t, ps in keep.items()},
        pending_revocation={},
    )
