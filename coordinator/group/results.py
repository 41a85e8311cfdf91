"""What the group coordinator answers with, typed and version-free (Kafka's coordinator returns
its generated response data; these are ours): the membership APIs (JoinGroup, SyncGroup,
ConsumerGroupHeartbeat) and the operators' views (ListGroups, DescribeGroups,
ConsumerGroupDescribe). The handlers (`broker/handlers/group_membership.py`,
`broker/handlers/consumer_group.py`, `broker/handlers/group_admin.py`) build each version's
response from them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from coordinator.group.consumer_records import Assignment


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader of a classic group's generation sees it (JoinGroup's `members`):
    its subscription in the group's chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup (key 11) answer. On an error the generation is -1 and the protocol unset;
    `member_id` is the id the member holds or is given (MEMBER_ID_REQUIRED, KIP-394); `members`
    is filled for the generation's leader only."""

    error_code: int
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str = ""
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """A SyncGroup (key 14) answer: the member's assignment (the protocol's bytes) and the
    group's protocol, both unset on an error."""

    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    """A ConsumerGroupHeartbeat (key 68, KIP-848) answer: the member's id and epoch (-1: it
    left or was fenced), the heartbeat interval (ms), and its new assignment (topic id ->
    partitions), None when unchanged since the last answer."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


#: A ShareGroupHeartbeat (key 76, KIP-932) answer has the same fields (its member epoch -1: the
#: member left; its assignment None: unchanged since the last answer).
ShareGroupHeartbeatResult = ConsumerGroupHeartbeatResult


#: "no operations" (authorized operations were not asked for): Kafka's Integer.MIN_VALUE
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One group of a ListGroups answer; `group_state` the name for its type (Kafka's)."""

    group_id: str
    protocol_type: str
    group_state: str
    group_type: str


@dataclass(frozen=True, slots=True)
class ListedGroups:
    """A ListGroups (key 16) answer of one coordinator."""

    error_code: int
    groups: list[ListedGroup]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """A member as DescribeGroups shows it: its subscription and assignment in the group's
    protocol's bytes (empty unless the group is Stable)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """One group of a DescribeGroups (key 15) answer."""

    error_code: int
    group_id: str
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: list[DescribedMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    """A topic's partitions in a ConsumerGroupDescribe assignment (its name "" when unknown)."""

    topic_id: uuid.UUID
    topic_name: str
    partitions: list[int]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    """A member as ConsumerGroupDescribe shows it (KIP-848)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[DescribedTopicPartitions]
    target_assignment: list[DescribedTopicPartitions]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe (key 69) answer; only the error and the id when
    `error_code` is not NONE."""

    error_code: int
    error_message: str | None
    group_id: str
    group_state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[DescribedConsumerMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True, slots=True)
class DescribedShareMember:
    """A member as ShareGroupDescribe shows it (KIP-932)."""

    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    assignment: list[DescribedTopicPartitions]


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    """One group of a ShareGroupDescribe (key 77) answer; only the error and the id when
    `error_code` is not NONE."""

    error_code: int
    error_message: str | None
    group_id: str
    group_state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: list[DescribedShareMember] = field(default_factory=list)
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
