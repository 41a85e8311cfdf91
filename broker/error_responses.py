"""The answer to a request whose handler failed: every entity of the request with one error code
(Kafka's `AbstractRequest.getErrorResponse`), so a client gets the API's error instead of a
closed connection.

`error_response(api_key, version, body, code)` returns a response body: the top-level
`error_code` for APIs that have one (their arrays left empty), else the request's topics,
partitions, resources, groups, ... mirrored with `code` in each. Message fields carry `message`
where the response has them. Callers encode it as any handler's answer.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.schemas import APIS
from protocol.types import ZERO_UUID


def _per_partition(body, code, message):
    """Requests and responses shaped topics[name, partitions[partition_index, ...]] (ListOffsets,
    OffsetCommit, DeleteRecords, TxnOffsetCommit)."""
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [{"partition_index": p.partition_index, "error_code": code} for p in t.partitions],
            }
            for t in body.topics
        ]
    }


def _produce(body, code, message):
    return {
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {"index": p.index, "error_code": code, "base_offset": -1, "error_message": message}
                    for p in t.partition_data
                ],
            }
            for t in body.topic_data
        ]
    }


def _metadata(body, code, message):
    topics = body.topics or []
    return {
        "brokers": [],
        "controller_id": -1,
        "topics": [
            {"error_code": code, "name": t.name if t.name is not None else "", "topic_id": t.topic_id, "partitions": []}
            for t in topics
        ],
    }


def _offset_for_leader_epoch(body, code, message):
    return {
        "topics": [
            {"topic": t.topic, "partitions": [{"partition": p.partition, "error_code": code} for p in t.partitions]}
            for t in body.topics
        ]
    }


def _write_txn_markers(body, code, message):
    return {
        "markers": [
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [{"partition_index": i, "error_code": code} for i in t.partition_indexes],
                    }
                    for t in m.topics
                ],
            }
            for m in body.markers
        ]
    }


def _describe_producers(body, code, message):
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": i, "error_code": code, "error_message": message} for i in t.partition_indexes
                ],
            }
            for t in body.topics
        ]
    }


def _resources(key: str, **extra):
    """Responses listing the request's resources (AlterConfigs, IncrementalAlterConfigs,
    DescribeConfigs with `configs=[]`)."""

    def build(body, code, message):
        return {
            key: [
                {
                    "error_code": code,
                    "error_message": message,
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    **extra,
                }
                for r in body.resources
            ]
        }

    return build


def _offset_fetch(body, code, message):
    def topics(ts):
        return [
            {"name": t.name, "partitions": [{"partition_index": i, "error_code": code} for i in t.partition_indexes]}
            for t in ts or []
        ]

    return {
        "error_code": code,
        "topics": topics(body.topics),
        "groups": [{"group_id": g.group_id, "topics": topics(g.topics), "error_code": code} for g in body.groups],
    }


def _fetch(body, code, message):
    return {
        "error_code": code,
        "responses": [
            {
                "topic": t.topic,
                "topic_id": t.topic_id,
                "partitions": [
                    {"partition_index": p.partition, "error_code": code, "high_watermark": -1, "records": b""}
                    for p in t.partitions
                ],
            }
            for t in body.topics
        ],
    }


def _elect_leaders(body, code, message):
    return {
        "error_code": code,
        "replica_election_results": [
            {
                "topic": t.topic,
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message} for p in t.partitions
                ],
            }
            for t in body.topic_partitions or []
        ],
    }


def _add_partitions_to_txn(body, code, message):
    return {
        "error_code": code,
        "results_by_topic_v3_and_below": [
            {
                "name": t.name,
                "results_by_partition": [{"partition_index": p, "partition_error_code": code} for p in t.partitions],
            }
            for t in body.v3_and_below_topics
        ],
        "results_by_transaction": [
            {"transactional_id": t.transactional_id, "topic_results": []} for t in body.transactions
        ],
    }


def _share_state(body, code, message):
    """The share coordinator's APIs (83-87): every partition asked answers the error."""
    return {
        "results": [
            {
                "topic_id": t.topic_id,
                "partitions": [
                    {"partition": p.partition, "error_code": code, "error_message": message} for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    }


def _find_coordinator(body, code, message):
    return {
        "error_code": code,
        "error_message": message,
        "node_id": -1,
        "host": "",
        "port": -1,
        "coordinators": [
            {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}
            for k in body.coordinator_keys
        ],
    }


_MIRRORS: dict[int, Callable] = {
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FETCH: _fetch,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.DESCRIBE_LOG_DIRS: lambda b, c, m: {"error_code": c, "results": []},
    ApiKey.PRODUCE: _produce,
    ApiKey.LIST_OFFSETS: _per_partition,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _per_partition,
    ApiKey.DESCRIBE_GROUPS: lambda b, c, m: {"groups": [{"error_code": c, "group_id": g} for g in b.groups]},
    ApiKey.CREATE_TOPICS: lambda b, c, m: {
        "topics": [
            {"name": t.name, "error_code": c, "error_message": m, "num_partitions": -1, "replication_factor": -1}
            for t in b.topics
        ]
    },
    ApiKey.DELETE_TOPICS: lambda b, c, m: {
        "responses": [{"name": n, "error_code": c, "error_message": m} for n in b.topic_names]
        + [{"name": t.name, "topic_id": t.topic_id or ZERO_UUID, "error_code": c, "error_message": m} for t in b.topics]
    },
    ApiKey.DELETE_RECORDS: _per_partition,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: _per_partition,
    ApiKey.CREATE_ACLS: lambda b, c, m: {"results": [{"error_code": c, "error_message": m} for _ in b.creations]},
    ApiKey.DELETE_ACLS: lambda b, c, m: {
        "filter_results": [{"error_code": c, "error_message": m, "matching_acls": []} for _ in b.filters]
    },
    ApiKey.DESCRIBE_CONFIGS: _resources("results", configs=[]),
    ApiKey.ALTER_CONFIGS: _resources("responses"),
    ApiKey.CREATE_PARTITIONS: lambda b, c, m: {
        "results": [{"name": t.name, "error_code": c, "error_message": m} for t in b.topics]
    },
    ApiKey.DELETE_GROUPS: lambda b, c, m: {"results": [{"group_id": g, "error_code": c} for g in b.groups_names]},
    ApiKey.CONSUMER_GROUP_DESCRIBE: lambda b, c, m: {
        "groups": [{"error_code": c, "error_message": m, "group_id": g} for g in b.group_ids]
    },
    ApiKey.SHARE_GROUP_DESCRIBE: lambda b, c, m: {
        "groups": [{"error_code": c, "error_message": m, "group_id": g} for g in b.group_ids]
    },
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _resources("responses"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: lambda b, c, m: {
        "results": [
            {"user": n, "error_code": c, "error_message": m}
            for n in dict.fromkeys([d.name for d in b.deletions] + [u.name for u in b.upsertions])
        ]
    },
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.ALTER_CLIENT_QUOTAS: lambda b, c, m: {
        "entries": [{"error_code": c, "error_message": m, "entity": list(e.entity)} for e in b.entries]
    },
    **dict.fromkeys(
        (
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        ),
        _share_state,
    ),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: lambda b, c, m: {
        "groups": [{"group_id": g.group_id, "topics": [], "error_code": c, "error_message": m} for g in b.groups]
    },
    ApiKey.DESCRIBE_TRANSACTIONS: lambda b, c, m: {
        "transaction_states": [
            {"error_code": c, "transactional_id": t, "transaction_state": "", "topics": []} for t in b.transactional_ids
        ]
    },
}


def _only_in_version(api_key: int, version: int, out: dict) -> dict:
    """`out` without the top-level fields `version` lacks (a mirror names them for all versions)."""
    shape = APIS[api_key].RESPONSE[version]
    present = {name for name, _sub, _default in shape.fields} | {name for _tag, name, _sub, _d in shape.tagged}
    return {k: v for k, v in out.items() if k in present}


def has_top_level_error(api_key: int, version: int) -> bool:
    shape = APIS[api_key].RESPONSE[version]
    return any(name == "error_code" for name, _sub, _default in shape.fields)


def error_response(api_key: int, version: int, body, code: ErrorCode, message: str | None = None) -> dict | None:
    """A response body answering every entity of `body` (the decoded request) with `code`; None
    for an API this module cannot answer (the connection is then closed, as before)."""
    if api_key in _MIRRORS:
        out = _only_in_version(api_key, version, _MIRRORS[api_key](body, code, message))
    elif has_top_level_error(api_key, version):
        out = {"error_code": code, "error_message": message}
    else:
        return None
    return {"throttle_time_ms": 0, **out}


#: the longest protocol string (int16 length), in UTF-8 bytes
MAX_STRING_BYTES = 32767


def _clip(text):
    encoded = text.encode() if isinstance(text, str) else b""
    return text if len(encoded) <= MAX_STRING_BYTES else encoded[:MAX_STRING_BYTES].decode(errors="ignore")


def clipped(value):
    """`value` (a response body) with every error message longer than a protocol string can be
    cut to MAX_STRING_BYTES at a character boundary: messages quoting a request's names (each at
    most that long) can exceed it. Other strings are left as they are (one too long is a bug)."""
    if isinstance(value, dict):
        return type(value)((k, _clip(v) if k.endswith("error_message") else clipped(v)) for k, v in value.items())
    if isinstance(value, list):
        return [clipped(v) for v in value]
    return value
