"""CreateTopics on the active controller's broker, as Kafka's ZooKeeper-mode `ZkAdminManager` does
it: in the request's own task, not in the controller's event loop, so a busy controller (a
failover electing hundreds of leaders on a loaded host) can delay a topic's leaders but never the
answer.

- A controller still failing over is waited for (its live brokers are what topics are placed
  on); one that resigns meanwhile answers NOT_CONTROLLER.
- Each topic is validated (name, configs, partitions, replication factor against the live brokers
  the active controller knows, a name given twice: INVALID_REQUEST, a topic being deleted:
  TOPIC_ALREADY_EXISTS) and, unless `validate_only`, written to ZooKeeper
  (`controller.topics.write_topic`); the controller's /brokers/topics watch then creates its
  partitions and elects their leaders. A coordinator's topic (`__consumer_offsets`,
  `__transaction_state`) is created with its coordinator's settings, whatever partitions,
  replication factor, assignment and configs the request gives (`broker/internal_topics.py`;
  the v5+ fields of the answer say what was made).
- The answer waits, up to `timeout_ms`, until this broker's metadata cache has a leader for every
  partition of the topics written (Kafka's DelayedCreatePartitions); topics still without leaders
  then answer REQUEST_TIMED_OUT (they are created all the same, as in Kafka). With `timeout_ms` <= 0
  the answer does not wait.
- The ZooKeeper work is bounded too, by `timeout_ms` (at least `MIN_ZK_BUDGET_MS`): ZooKeeper
  unreachable, or a ZooKeeper failure writing a topic, answers REQUEST_TIMED_OUT for the topics not
  written (a write abandoned at the deadline may still take effect later, as in Kafka; a retry then
  answers TOPIC_ALREADY_EXISTS).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

import trio

from broker.internal_topics import internal_topic_spec
from controller.topics import TopicError, check_partition_count, plan_topic, write_topic
from protocol.errors import ErrorCode
from protocol.types import ZERO_UUID
from zk import znodes
from zk.client import SESSION_ERRORS

if TYPE_CHECKING:
    from broker.context import BrokerContext


log = logging.getLogger(__name__)

#: the least time given to the ZooKeeper writes (ms), whatever the request's timeout_ms (0 asks
#: not to wait for leaders, not to give up before writing)
MIN_ZK_BUDGET_MS = 5000


async def create_topics(ctx: BrokerContext, topics: list, validate_only: bool, timeout_ms: int) -> list[dict]:
    """CreateTopics (key 19) v2-7: `topics` are the request's topic entries (already authorized);
    returns one result dict per entry, in order (v5+ fields filled)."""
    started = trio.current_time()
    deadline = started + max(timeout_ms, MIN_ZK_BUDGET_MS) / 1000
    controller, zk = ctx.controller, ctx.zk
    if controller is None or zk is None:  # a broker serving without ZooKeeper (unit tests)
        return [_result(t.name, ErrorCode.NOT_CONTROLLER, "not the controller") for t in topics]
    with trio.move_on_at(deadline):
        await controller.wait_settled()  # a failover in progress: its live brokers are not known yet
        await controller.wait_live(ctx.config.broker_id)  # this broker just registered
    if not controller.active:
        return [_result(t.name, ErrorCode.NOT_CONTROLLER, "not the controller") for t in topics]
    if not controller.ready:
        return [_result(t.name, ErrorCode.REQUEST_TIMED_OUT, "the controller is still failing over") for t in topics]
    live = sorted(controller.ctx.live_ids)
    counts = Counter(t.name for t in topics)
    results: list[dict] = []
    written: dict[str, int] = {}  # topic -> partitions, for the wait
    planned = 0  # partitions planned so far in this request (MAX_PARTITIONS_PER_REQUEST)
    for t in topics:
        result = _result(t.name, ErrorCode.NONE, None)
        results.append(result)
        if trio.current_time() >= deadline:
            result.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="ZooKeeper did not answer in time")
            continue
        try:
            if counts[t.name] > 1:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Create topics request contains duplicate topic {t.name}")
            configs = {c.name: c.value for c in t.configs}
            manual = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            partitions = t.num_partitions if t.num_partitions != -1 else ctx.config["num.partitions"]
            rf = t.replication_factor if t.replication_factor != -1 else ctx.config["default.replication.factor"]
            spec = internal_topic_spec(ctx, t.name)
            if spec is not None:  # a coordinator's topic: its settings, whatever the request asked
                configs, manual, partitions, rf = dict(spec.configs), {}, spec.partitions, spec.replication_factor
            if t.name in controller.ctx.assignments:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            check_partition_count(len(manual) or max(partitions, 0), planned)
            assignment = plan_topic(t.name, partitions, rf, live, configs, manual)
            planned += len(assignment)
            result.update(num_partitions=len(assignment), replication_factor=len(assignment[0]))
            if validate_only:
                continue
            with trio.move_on_at(deadline):
                if await zk.exists(f"{znodes.DELETE_TOPICS}/{t.name}") is not None:
                    raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
                result["topic_id"] = await write_topic(zk, t.name, assignment, configs)
                written[t.name] = len(assignment)
            if t.name not in written:
                result.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message="ZooKeeper did not answer in time")
                continue
            log.info("topic %s written: %d partitions, RF %d", t.name, len(assignment), len(assignment[0]))
        except TopicError as e:
            result.update(error_code=e.error_code, error_message=str(e))
        except SESSION_ERRORS as e:
            result.update(error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=f"ZooKeeper: {type(e).__name__}")
    if written and timeout_ms > 0:
        with trio.move_on_at(started + timeout_ms / 1000):
            await ctx.metadata_cache.wait_until(
                lambda: all(_has_leaders(ctx.metadata_cache, name, n) for name, n in written.items())
            )
        for result in results:
            name = result["name"]
            if name in written and not _has_leaders(ctx.metadata_cache, name, written[name]):
                result.update(
                    error_code=ErrorCode.REQUEST_TIMED_OUT,
                    error_message=f"Topic '{name}' was written but its leaders were not known within {timeout_ms} ms.",
                )
    return results


def _result(name: str, code: ErrorCode, message: str | None) -> dict:
    """One topic's result (CreateTopics v5+ fields; the encoder drops what a version lacks)."""
    return {
        "name": name,
        "error_code": code,
        "error_message": message,
        "num_partitions": -1,
        "replication_factor": -1,
        "topic_id": ZERO_UUID,
    }


def _has_leaders(cache, topic: str, partitions: int) -> bool:
    parts = cache.partitions.get(topic, {})
    return len(parts) >= partitions and all(p.leader >= 0 for p in parts.values())


async def auto_create_topic(
    ctx: BrokerContext, name: str, partitions: int, replication: int, configs: dict
) -> ErrorCode:
    """Topic auto-creation on any broker, as Kafka's ZooKeeper mode does it (Metadata with
    `auto.create.topics.enable`, FindCoordinator for `__consumer_offsets` and
    `__transaction_state`): the broker writes the topic to ZooKeeper itself, placed on the live
    brokers its metadata knows, and the controller's watch makes its partitions. NONE when it was
    written or already exists; INVALID_REPLICATION_FACTOR while fewer brokers are alive than
    `replication`; else the validation's code (INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, ...)."""
    assert ctx.zk is not None, "auto-creation writes to ZooKeeper"
    live = sorted(ctx.metadata_cache.brokers)
    if len(live) < replication:
        log.info("%s needs %d live brokers (its replication factor), %d are alive", name, replication, len(live))
        return ErrorCode.INVALID_REPLICATION_FACTOR
    try:
        assignment = plan_topic(name, partitions, replication, live, configs)
        await write_topic(ctx.zk, name, assignment, configs)
    except TopicError as e:
        if e.error_code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return ErrorCode.NONE
        log.warning("could not create %s: %s", name, e)
        return e.error_code
    log.info("auto-created %s with %d partitions", name, len(assignment))
    return ErrorCode.NONE
