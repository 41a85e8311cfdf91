"""DescribeLogDirs (API 35, v0-4): each of this broker's log dirs with the partitions it holds
(size in bytes, offset lag = max(HW - LEO, 0) as Kafka's `getLogEndOffsetLag` reports for a current
replica), and v4's total and usable bytes of the dir's file system. A dir taken offline by an I/O
error answers KAFKA_STORAGE_ERROR with no partitions. `topics` null describes every partition;
otherwise only those named (unknown ones are left out, as in Kafka)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from broker.authz import Op, cluster_allowed
from broker.server import Handler
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from protocol.api import Request


API_KEY = ApiKey.DESCRIBE_LOG_DIRS


def _disk(path) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle(ctx: BrokerContext, request: Request):
    body, version = request.body, request.api_version
    rm = ctx.replica_manager
    log_manager = rm.log_manager
    wanted = None if body.topics is None else {(t.topic, p) for t in body.topics for p in t.partitions}
    if not cluster_allowed(ctx, request, Op.DESCRIBE):  # as Kafka: v3+ say why, older get nothing
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    results = []
    for log_dir in log_manager.log_dirs:
        result = {"error_code": ErrorCode.NONE, "log_dir": str(log_dir), "topics": []}
        if version >= 4:
            result["total_bytes"], result["usable_bytes"] = _disk(log_dir)
        if log_dir in log_manager.offline_dirs:
            result["error_code"] = ErrorCode.KAFKA_STORAGE_ERROR
            results.append(result)
            continue
        topics: dict[str, list[dict]] = {}
        for tp, lg in sorted(log_manager.logs.items()):
            if log_manager.dir_of(tp) != log_dir or (wanted is not None and tp not in wanted):
                continue
            lag = max(rm.high_watermark_of(tp) - lg.log_end_offset, 0)
            topics.setdefault(tp[0], []).append(
                {"partition_index": tp[1], "partition_size": lg.size, "offset_lag": lag, "is_future_key": False}
            )
        result["topics"] = [{"name": name, "partitions": parts} for name, parts in topics.items()]
        results.append(result)
    response = {"throttle_time_ms": 0, "results": results}
    if version >= 3:
        response["error_code"] = ErrorCode.NONE
    return response


HANDLERS: dict[int, Handler] = {API_KEY: handle}
