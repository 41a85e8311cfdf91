"""Kafka's rule for topic names (Kafka `org.apache.kafka.common.internals.Topic.validate`): 1 to 249
characters of `[a-zA-Z0-9._-]`, and neither `.` nor `..`. Every place a topic name arrives from
outside (CreateTopics, auto-creation, Metadata, Produce, the controller's requests) and every place
a name becomes a path (a partition directory `<topic>-<partition>` inside a log dir) checks it,
so a name can never reach outside its log dir."""

from __future__ import annotations

import re

from protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
#: Kafka's internal topics (`Topic.INTERNAL_TOPICS`): marked internal in Metadata; their
#: coordinators write them, with cleanup.policy=compact
GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"  # KIP-932's share coordinator
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class InvalidTopic(KafkaError, ValueError):
    """A topic name that breaks Kafka's rule; answered with INVALID_TOPIC_EXCEPTION (17)."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION


def is_valid_topic_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_NAME_LENGTH
        and name not in (".", "..")
        and _LEGAL.fullmatch(name) is not None
    )


def validate_topic_name(name: object) -> str:
    """`name` if it is a legal topic name; raises InvalidTopic otherwise."""
    if not is_valid_topic_name(name):
        raise InvalidTopic(
            f"topic name {name!r} is illegal: it must be 1-{MAX_NAME_LENGTH} characters of [a-zA-Z0-9._-], not '.' or '..'"
        )
    return name  # type: ignore[return-value]
