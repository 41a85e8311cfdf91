"""Who appends to a log (Kafka's `AppendOrigin`, storage.internals.log): the origin travels from
the request down to `Log.append_as_leader`, which validates by it."""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's `AppendOrigin`): a CLIENT's batches are validated as client records
    (Kafka's LogValidator) and refused when they hold control records, need acks in (-1, 0, 1)
    and count in the topic's byte and record rates; a COORDINATOR's (the group and transaction
    coordinators' own batches, WriteTxnMarkers' markers) are trusted, and its control batches
    are checked against the producer state. Followers append through `Partition` with origin
    REPLICATION, as Kafka's `appendAsFollower`, never through `append_records`."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
