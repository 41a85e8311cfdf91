"""One consumer group's state (Kafka's `GroupMetadata`, classic protocol): members, generation,
protocol, committed offsets. Pure: no I/O, no trio, no clock of its own (times are passed in, ms).

States and their valid previous states (a transition not in `VALID_PREVIOUS` raises
`IllegalGroupTransition` and changes nothing):
- Empty: no members (a new group, or all left); offsets may be committed ("simple" consumers).
- PreparingRebalance: waiting for members to (re)join; from Empty, Stable, CompletingRebalance.
- CompletingRebalance: a generation chosen, waiting for the leader's assignment (SyncGroup);
  from PreparingRebalance.
- Stable: assignment delivered; from CompletingRebalance.
- Dead: removed (deleted, expired, or its partition unloaded); from any state.
Empty is entered only from PreparingRebalance (a rebalance that ends with nobody).

Members: `members` (joined), `pending_members` (ids handed out with MEMBER_ID_REQUIRED, KIP-394,
not yet joined), `static_members` (group.instance.id -> member id, KIP-345). The leader is the
first member to join a generation; when it leaves, any remaining member takes over.
`join_waiter` / `sync_waiter` are opaque objects the coordinator shell hangs on a member while its
JoinGroup / SyncGroup waits: this module only tests them for None and clears them.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from dataclasses import dataclass, field
from typing import Any

from coordinator.group.consumer_group import ConsumerGroup
from coordinator.group.records import OffsetAndMetadata, StoredGroup, StoredMember
from coordinator.group.share_group import ShareGroup
from protocol.consumer_protocol import subscribed_topics

#: the longest member id prefix: a protocol string's 32,767 bytes less "-" and a UUID
MAX_MEMBER_ID_PREFIX_BYTES = 32767 - 37


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupTransition(RuntimeError):
    """A state change Kafka's group state machine does not allow."""


@dataclass
class MemberMetadata:
    """A joined member. Timeouts in ms; `protocols` is [(name, metadata bytes)] in the member's
    order of preference; `assignment` what the leader gave it in the current generation."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Any = None
    sync_waiter: Any = None
    heartbeat_deadline_ms: float = 0.0

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    current_state_timestamp_ms: int | None = None
    new_member_added: bool = False
    #: (topic, partition) -> committed offset; and the log offset of the record that set it
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    offset_log_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    #: producer id -> offsets it committed in its open transaction (TxnOffsetCommit, KIP-98):
    #: (topic, partition) -> (offset, log offset of its record); visible once the COMMIT marker lands
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = field(default_factory=dict)
    #: the group's KIP-848 state when it is a consumer group (its classic state stays Empty)
    consumer: ConsumerGroup | None = None
    #: the group's KIP-932 state when it is a share group (its classic state stays Empty)
    share: ShareGroup | None = None
    #: member id -> its member epoch in the consumer group this group was converted from: its
    #: commits of that epoch are accepted until the first generation after the conversion
    converted_epochs: dict[str, int] = field(default_factory=dict)

    # ---- state ---------------------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int | None = None) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def replace_classic(self, other: GroupMetadata) -> None:
        """The classic group this object carries becomes `other` (built for the conversion from
        or to a consumer group, where Kafka replaces the group object): its members, generation,
        protocol, leader, state and state timestamp. Offsets and the consumer part stay."""
        self.members, self.static_members, self.pending_members = (
            other.members,
            other.static_members,
            other.pending_members,
        )
        self.generation_id, self.protocol_type = other.generation_id, other.protocol_type
        self.protocol_name, self.leader_id = other.protocol_name, other.leader_id
        self.state, self.current_state_timestamp_ms = other.state, other.current_state_timestamp_ms
        self.converted_epochs = other.converted_epochs

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # ---- members -------------------------------------------------------------------------------
    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None = None) -> str:
        """Kafka's form: `<group.instance.id or client.id>-<random UUID>`, the prefix cut (at a
        character boundary) so the id fits a protocol string (32,767 UTF-8 bytes): a client id
        of the longest length a request can carry would otherwise make an unencodable answer."""
        prefix = (group_instance_id or client_id).encode()
        if len(prefix) > MAX_MEMBER_ID_PREFIX_BYTES:
            prefix = prefix[:MAX_MEMBER_ID_PREFIX_BYTES]
        return f"{prefix.decode(errors='ignore')}-{uuid.uuid4()}"

    def is_empty(self) -> bool:
        return not self.members

    def size(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A request naming a group.instance.id whose current member is someone else."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        if member is not None and member.group_instance_id is not None:
            if self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """KIP-345: a restarted static member takes over its old membership under a new id; the
        old id is fenced from now on. Returns the member (its waiters are the caller's to fail)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[group_instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        return member

    def awaiting_join(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.join_waiter is not None]

    def has_all_members_joined(self) -> bool:
        return len(self.awaiting_join()) == len(self.members) and not self.pending_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Kafka's `maybeElectNewJoinedLeader`: a leader that has not rejoined (a static member
        kept through the rebalance) hands the lead to a member that has; False when none has."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.join_waiter is not None:
            return True
        joined = next((m for m in self.members.values() if m.join_waiter is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.join_waiter is None]

    # ---- protocols -----------------------------------------------------------------------------
    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order."""
        if not self.members:
            return []
        first, *rest = self.members.values()
        names = [n for n, _ in first.protocols]
        return [n for n in names if all(any(n == p for p, _ in m.protocols) for m in rest)]

    def supports_protocols(self, protocol_type: str, protocols: list[str]) -> bool:
        """Kafka's `supportsProtocols`: an empty group takes any non-empty type and protocol
        list; otherwise the type must match and one protocol must be common to everyone."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        candidates = set(self.candidate_protocols())
        return any(p in candidates for p in protocols)

    def select_protocol(self) -> str:
        """The members' vote: each votes for its most preferred candidate; most votes wins (ties
        go to the candidate the first member prefers)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise IllegalGroupTransition(f"group {self.group_id}: no protocol common to all members")
        votes = dict.fromkeys(candidates, 0)
        for m in self.members.values():
            votes[next(n for n, _ in m.protocols if n in votes)] += 1
        return max(candidates, key=lambda n: votes[n])

    def init_next_generation(self, now_ms: int) -> None:
        """End a rebalance: next generation, protocol chosen, CompletingRebalance (or Empty when
        nobody is left). Assignments of the last generation are cleared."""
        self.generation_id += 1
        self.converted_epochs.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        for m in self.members.values():
            m.assignment = b""
        self.new_member_added = False

    @property
    def group_type(self) -> str:
        """ "consumer" for a KIP-848 group, "share" for a KIP-932 one, else "classic" (ListGroups'
        / DescribeGroups' type)."""
        if self.share is not None:
            return "share"
        return "consumer" if self.consumer is not None else "classic"

    def has_members(self) -> bool:
        """Members of any protocol (a consumer or share group's classic state is always Empty)."""
        return (
            bool(self.members)
            or (self.consumer is not None and bool(self.consumer.members))
            or (self.share is not None and bool(self.share.members))
        )

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when not known."""
        if self.consumer is not None:
            return self.consumer.subscribed_topic_names()
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            found = subscribed_topics(m.metadata_for(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return topics

    # ---- persistence ---------------------------------------------------------------------------
    def stored(self, assignments: dict[str, bytes] | None = None) -> StoredGroup:
        """This generation as a `GroupMetadataValue` (assignments default to the members')."""
        return StoredGroup(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.current_state_timestamp_ms if self.current_state_timestamp_ms is not None else -1,
            tuple(
                StoredMember(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(self.protocol_name) if self.protocol_name else b"",
                    (assignments or {}).get(m.member_id, m.assignment),
                )
                for m in self.members.values()
            ),
        )

    def stored_with_new_id(
        self,
        old_id: str,
        new_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> StoredGroup:
        """`stored()` as it will be once the static member `old_id` rejoined as `new_id` from
        (`client_id`, `client_host`) with the given timeouts (KIP-345), this group left as it is."""
        stored = self.stored()
        members = tuple(
            dataclasses.replace(
                m,
                member_id=new_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance_timeout_ms,
                session_timeout_ms=session_timeout_ms,
            )
            if m.member_id == old_id
            else m
            for m in stored.members
        )
        leader = new_id if stored.leader == old_id else stored.leader
        return dataclasses.replace(stored, members=members, leader=leader)

    @classmethod
    def loaded(cls, group_id: str, stored: StoredGroup, now_ms: float) -> GroupMetadata:
        """A group read back from its latest `GroupMetadataValue`: Stable with its members, or
        Empty without (Kafka's `GroupMetadata.loadGroup`); every member's session restarts at
        `now_ms`, a reading of the coordinator's monotonic clock (never the wall clock)."""
        group = cls(group_id, state=GroupState.STABLE if stored.members else GroupState.EMPTY)
        group.generation_id = stored.generation
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol
        group.leader_id = stored.leader
        group.current_state_timestamp_ms = (
            stored.current_state_timestamp_ms if stored.current_state_timestamp_ms >= 0 else None
        )
        for m in stored.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                stored.protocol_type,
                [(stored.protocol or "", m.subscription)],
                m.assignment,
                heartbeat_deadline_ms=now_ms + m.session_timeout_ms,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        return group
