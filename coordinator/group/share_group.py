"""A share group of KIP-932, in memory (Kafka's `ShareGroup` / `ShareGroupMember`): pure state,
changed only by replaying its records (`share_records`), both when a partition of
`__consumer_offsets` is loaded and after the coordinator's own appends.

- `group_epoch` grows on every change of membership, subscriptions or the subscribed topics'
  partitions (`metadata_hash`); `assignment_epoch` is the group epoch the target assignment
  (`target`, member id -> Assignment) was computed for.
- A member's assignment is its target at once: in a share group several members may hold the
  same partition, so nothing is revoked before it is given (Kafka's share members are always
  Stable).
- `state_partitions` (record 15): the topic-partitions whose share-partition state may exist
  at the share coordinator (the group's assignments and offset resets put them there; deleting
  a topic's offsets takes it out), which DeleteGroups and DeleteShareGroupOffsets delete and
  DescribeShareGroupOffsets lists.
- Group state (Kafka's `ShareGroup.ShareGroupState`): Empty (no members), Stable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coordinator.group import share_records as sr
from coordinator.group.consumer_records import Assignment
from coordinator.group.share_records import (
    ShareCurrentAssignment,
    ShareMemberMetadata,
    ShareRecord,
    StatePartitionMetadata,
)

#: ShareGroupHeartbeat's member epochs with a meaning of their own
JOIN_EPOCH = 0
LEAVE_EPOCH = -1


@dataclass(frozen=True)
class ShareMember:
    member_id: str
    metadata: ShareMemberMetadata = field(default_factory=ShareMemberMetadata)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    #: whether the group's epoch record exists (a group whose records were all deleted does not)
    exists: bool = False
    state_partitions: StatePartitionMetadata = field(default_factory=StatePartitionMetadata)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.metadata.subscribed_topic_names}

    # ---- replay ----------------------------------------------------------------------------------
    def replay(self, record: ShareRecord) -> None:
        """Apply one record (or tombstone) of this group; idempotent for a repeated record."""
        kind, value, member_id = record.kind, record.value, record.member_id or ""
        if kind == sr.GROUP_EPOCH:
            self.exists = value is not None
            self.group_epoch = value.epoch if value is not None else 0
            self.metadata_hash = value.metadata_hash if value is not None else 0
        elif kind == sr.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = value if value is not None else 0
        elif kind == sr.STATE_PARTITION_METADATA:
            self.state_partitions = value if value is not None else StatePartitionMetadata()
        elif kind == sr.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(member_id, None)
            else:
                self.target[member_id] = dict(value)
        elif kind == sr.MEMBER_METADATA:
            old = self.members.get(member_id)
            if value is None:
                self.members.pop(member_id, None)
            else:
                self.members[member_id] = (
                    replace(old, metadata=value) if old is not None else ShareMember(member_id, value)
                )
        elif kind == sr.CURRENT_ASSIGNMENT:
            old = self.members.get(member_id)
            if value is None:
                if old is not None:
                    self.members[member_id] = replace(old, assigned={})
                return
            base = old if old is not None else ShareMember(member_id)
            self.members[member_id] = replace(
                base,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                assigned=dict(value.assigned),
            )

    # ---- records ---------------------------------------------------------------------------------
    def current_record(self, member: ShareMember) -> ShareRecord:
        value = ShareCurrentAssignment(member.member_epoch, member.previous_member_epoch, member.assigned)
        return ShareRecord(sr.CURRENT_ASSIGNMENT, self.group_id, member.member_id, value)

    def member_tombstones(self, member_id: str) -> list[ShareRecord]:
        """Kafka's order for removing a member: current assignment, target, metadata."""
        return [
            ShareRecord(sr.CURRENT_ASSIGNMENT, self.group_id, member_id),
            ShareRecord(sr.TARGET_ASSIGNMENT_MEMBER, self.group_id, member_id),
            ShareRecord(sr.MEMBER_METADATA, self.group_id, member_id),
        ]

    def state_partitions_record(self, initialized: sr.TopicPartitions) -> ShareRecord:
        """Record 15 with `initialized` as the topic-partitions holding share state."""
        value = StatePartitionMetadata(initialized=initialized)
        return ShareRecord(sr.STATE_PARTITION_METADATA, self.group_id, None, value)

    def with_initialized(self, added: sr.TopicPartitions) -> sr.TopicPartitions | None:
        """The initialized topic-partitions with `added` joined in; None when nothing is new."""
        current = self.state_partitions.initialized
        merged = dict(current)
        for topic_id, (name, parts) in added.items():
            old = merged.get(topic_id)
            merged[topic_id] = (name, parts | old[1]) if old is not None and old[0] == name else (name, parts)
        return None if merged == current else merged

    def group_tombstones(self) -> list[ShareRecord]:
        """Every record of the group, deleted (DeleteGroups)."""
        out: list[ShareRecord] = []
        for member_id in list(self.members):
            out += self.member_tombstones(member_id)
        out += [
            ShareRecord(sr.STATE_PARTITION_METADATA, self.group_id),
            ShareRecord(sr.TARGET_ASSIGNMENT_METADATA, self.group_id),
            ShareRecord(sr.GROUP_EPOCH, self.group_id),
        ]
        return out
