"""A consumer group of KIP-848's protocol, in memory (Kafka's `ConsumerGroup` / `ConsumerGroupMember`):
pure state, changed only by replaying its records (`consumer_records`), both when a partition of
`__consumer_offsets` is loaded and after the coordinator's own appends; so what a new coordinator
loads is exactly what the old one served.

- `group_epoch` grows on every change of membership, subscriptions or subscribed topics;
  `assignment_epoch` is the group epoch the target assignment (`target`, member id -> Assignment)
  was computed for.
- Each member has a member epoch, a reconciliation state (`MemberState`) and its current
  assignment: `assigned` (what it may consume) and `pending_revocation` (what it must give up
  before it moves on). A partition is owned by a member while it is in either set; `owner_of`
  answers that, so a partition is given to a new member only once the old one released it.
- Group state (Kafka's names): Empty (no members), Assigning (the target is behind the group
  epoch), Reconciling (a member is not yet at the target's epoch or not stable), Stable.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

from coordinator.group import consumer_records as cr
from coordinator.group.consumer_records import (
    Assignment,
    ConsumerRecord,
    CurrentAssignment,
    MemberMetadata,
    TopicMetadata,
)

#: ConsumerGroupHeartbeat's member epochs with a meaning of their own
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's `MemberState` (the byte written in record 8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    metadata: MemberMetadata = field(default_factory=MemberMetadata)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: KIP-1251: (topic id, partition) -> the member epoch at which this member was given the
    #: partition (derived on replay; after compaction only the latest record is left, which
    #: gives the member's current epoch: stricter, never looser)
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    @property
    def instance_id(self) -> str | None:
        return self.metadata.instance_id

    def current_assignment(self) -> CurrentAssignment:
        return CurrentAssignment(
            self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned, self.pending_revocation
        )

    def with_current(self, current: CurrentAssignment) -> ConsumerMember:
        try:
            state = MemberState(current.state)
        except ValueError:
            state = MemberState.UNKNOWN
        assigned = dict(current.assigned or {})
        epochs = {tp: self.assignment_epochs.get(tp, current.member_epoch) for tp in partitions_of(assigned)}
        return replace(
            self,
            member_epoch=current.member_epoch,
            previous_member_epoch=current.previous_member_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=dict(current.pending_revocation or {}),
            assignment_epochs=epochs,
        )

    def may_commit_at(self, member_epoch: int, partitions: list[tuple[uuid.UUID, int] | None]) -> bool:
        """KIP-1251's rule for a commit carrying an older epoch than the member's: each
        partition (None: a topic the group does not know) must be assigned to this member since
        an epoch no later than the one sent. A commit that raced the heartbeat bumping the epoch
        is accepted; a zombie's commit for a partition since moved is not."""
        epochs = self.assignment_epochs
        return all(tp is not None and epochs.get(tp, member_epoch + 1) <= member_epoch for tp in partitions)


def partitions_of(assignment: Assignment) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}  # topic name -> metadata
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self._owners: dict[tuple[uuid.UUID, int], str] = {}
        self.exists = False  # a group epoch record is live (not tombstoned)
        #: a memo, not state: the topics mapping `subscription_metadata` was last found equal to
        #: a recomputation against, while no member's metadata changed (cleared when one does)
        self._subscription_checked_against: object | None = None

    # ---- reading ---------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self._owners.get((topic_id, partition))

    def subscription_checked(self, topics: object, mark: bool = False) -> bool:
        """Whether `subscription_metadata` is known to be what the members' subscriptions give
        against `topics` (the very mapping object: the coordinator builds a new one whenever the
        cluster's topics change); `mark` records that it was just found so. A heartbeat that
        changes nothing skips the recomputation over every member."""
        if mark:
            self._subscription_checked_against = topics
        return self._subscription_checked_against is topics

    def subscribed_topic_names(self) -> set[str]:
        """The names of the topics some member subscribes to and the cluster has."""
        return set(self.subscription_metadata)

    # ---- replay ----------------------------------------------------------------------------------
    def replay(self, record: ConsumerRecord) -> None:
        """Apply one record (or tombstone) of this group; idempotent for a repeated record."""
        kind, value, member_id = record.kind, record.value, record.member_id or ""
        if kind == cr.GROUP_EPOCH:
            if value is None:
                self.exists = False
                self.group_epoch = 0
            else:
                self.exists = True
                self.group_epoch = value
        elif kind == cr.SUBSCRIPTION_METADATA:
            self.subscription_metadata = dict(value or {})
            self._subscription_checked_against = None
        elif kind == cr.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = value if value is not None else 0
        elif kind == cr.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = dict(value)
        elif kind == cr.MEMBER_METADATA:
            self._replay_member_metadata(member_id, value)
        elif kind == cr.CURRENT_ASSIGNMENT:
            self._replay_current(member_id, value)

    def _replay_member_metadata(self, member_id: str, metadata: MemberMetadata | None) -> None:
        self._subscription_checked_against = None  # a subscription may have changed
        old = self.members.get(member_id)
        if old is not None and old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        if metadata is None:
            if old is not None:
                self._set_owned(member_id, old, None)
                del self.members[member_id]
            return
        member = replace(old, metadata=metadata) if old is not None else ConsumerMember(member_id, metadata)
        self.members[member_id] = member
        if metadata.instance_id is not None:
            self.static_members[metadata.instance_id] = member_id

    def _replay_current(self, member_id: str, current: CurrentAssignment | None) -> None:
        old = self.members.get(member_id)
        if current is None:
            if old is not None:
                self._set_owned(member_id, old, None)
                self.members[member_id] = old.with_current(CurrentAssignment(assigned={}, pending_revocation={}))
            return
        base = old if old is not None else ConsumerMember(member_id)
        new = base.with_current(current)
        self._set_owned(member_id, old, new)
        self.members[member_id] = new

    def _set_owned(self, member_id: str, old: ConsumerMember | None, new: ConsumerMember | None) -> None:
        if old is not None:
            for tp in partitions_of(old.assigned) | partitions_of(old.pending_revocation):
                if self._owners.get(tp) == member_id:
                    del self._owners[tp]
        if new is not None:
            for tp in partitions_of(new.assigned) | partitions_of(new.pending_revocation):
                self._owners[tp] = member_id

    # ---- records that remove -------------------------------------------------------------------
    def member_tombstones(self, member_id: str) -> list[ConsumerRecord]:
        """Kafka's order for removing a member: current assignment, target, metadata."""
        return [
            ConsumerRecord(cr.CURRENT_ASSIGNMENT, self.group_id, member_id),
            ConsumerRecord(cr.TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
            ConsumerRecord(cr.MEMBER_METADATA, self.group_id, member_id),
        ]

    def group_tombstones(self) -> list[ConsumerRecord]:
        """Every record of the group, deleted (DeleteGroups, or a conversion to a classic group)."""
        out: list[ConsumerRecord] = []
        for member_id in list(self.members):
            out += self.member_tombstones(member_id)
        out += [
            ConsumerRecord(cr.TARGET_ASSIGNMENT_METADATA, self.group_id),
            ConsumerRecord(cr.SUBSCRIPTION_METADATA, self.group_id),
            ConsumerRecord(cr.GROUP_EPOCH, self.group_id),
        ]
        return out
