"""The pure part of AlterShareGroupOffsets (KIP-932): which asked partitions are refused outright
and which go to the share coordinator."""

import uuid

from coordinator.group.consumer_records import TopicMetadata
from coordinator.group.share_offsets import PartitionOutcome, plan_alter
from protocol.errors import ErrorCode as E

ORDERS = TopicMetadata(uuid.UUID(int=1), "orders", 2)


def test_unknown_topics_partitions_and_negative_offsets_are_refused_the_rest_planned():
    outcomes, valid = plan_alter(
        {"orders": [(0, 5), (1, -1), (2, 0)], "missing": [(0, 0)]},
        {"orders": ORDERS},
    )
    assert valid == [(ORDERS, 0, 5)]
    by_name = {o.name: o for o in outcomes}
    assert by_name["orders"].topic_id == ORDERS.topic_id
    assert [(p.partition, p.error_code) for p in by_name["orders"].partitions] == [
        (1, E.INVALID_REQUEST),
        (2, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert by_name["missing"].topic_id == uuid.UUID(int=0)
    assert by_name["missing"].partitions == [PartitionOutcome(0, E.UNKNOWN_TOPIC_OR_PARTITION, "Unknown partition 0")]


def test_nothing_asked_plans_nothing():
    assert plan_alter({}, {"orders": ORDERS}) == ([], [])
