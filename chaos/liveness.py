"""Liveness, judged after a nemesis heals (issue 33): the cluster comes back to full service by
itself, within bounds, beside the safety the history checkers judge.

After the heal (every broker process running again, ZooKeeper up), measured from that moment:
- every partition of every topic has a leader within `LEADERS_BOUND_S`;
- no partition is under-replicated (ISR = replicas) within `REPLICATED_BOUND_S`;
- CreateTopics and DeleteTopics, sent to the controller the metadata names, are each answered
  within their timeout_ms (plus `SLACK_S`), and succeed within `ADMIN_BOUND_S` of the first
  try (made once every partition is led and fully replicated): an
  answer that names a cluster still healing (a broker re-registering after its ZooKeeper session
  expired: INVALID_REPLICATION_FACTOR; a controller moving: NOT_CONTROLLER) is asked again, as an
  application would, and any other error is a violation at once; InitProducerId for a
  transactional id within its coordinator lookup plus the request timeout;
- no broker process exited that the nemesis did not kill (a SIGKILL exits -9; anything else a
  broker did by itself);
- when a nemesis killed a group member (also with its coordinator in the same fault), the group is
  Stable with only the survivors within the member's session.timeout.ms + 15 s of the kill;
- in the transactional scenario, every transaction left open when its producers stop is decided
  (committed or aborted: the LSO reaches the HW on every partition, read_committed readers pass it)
  within transaction.timeout.ms + 15 s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from client import Cluster, ConnectionClosed, KafkaError
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.types import ZERO_UUID

LEADERS_BOUND_S = 30.0
REPLICATED_BOUND_S = 60.0
ADMIN_TIMEOUT_MS = 10_000
SLACK_S = 2.0
ADMIN_BOUND_S = 30.0
#: answers that describe a cluster still healing, asked again for up to `ADMIN_BOUND_S`
ADMIN_TRANSIENT = {"INVALID_REPLICATION_FACTOR", "NOT_CONTROLLER", "REQUEST_TIMED_OUT"}
INIT_PRODUCER_ID_BOUND_S = 30.0


@dataclass
class Liveness:
    leaders_s: float | None = None  # heal -> every partition led (None: not within the bound)
    replicated_s: float | None = None  # heal -> no under-replicated partition
    admin: dict[str, tuple[float, str] | None] = field(default_factory=dict)  # API -> (s, answer)
    exited: list[str] = field(default_factory=list)  # brokers that exited by themselves
    group_measured: bool = False  # a group member was killed: `group_s` is judged
    group_s: float | None = None  # member killed -> the group Stable with the survivors only
    txn_measured: bool = False  # transactional producers stopped: `txn_s` is judged
    txn_s: float | None = None  # producers stopped -> every transaction decided (LSO = HW)

    @property
    def heal_s(self) -> float | None:
        """The time to full service: every partition led and fully replicated."""
        if self.leaders_s is None or self.replicated_s is None:
            return None
        return max(self.leaders_s, self.replicated_s)

    def violations(self) -> list[str]:
        out = []
        if self.leaders_s is None:
            out.append(f"a partition without a leader {LEADERS_BOUND_S:.0f} s after the heal")
        if self.replicated_s is None:
            out.append(f"under-replicated partitions {REPLICATED_BOUND_S:.0f} s after the heal")
        out += [f"{api} not answered in time" for api, answer in self.admin.items() if answer is None]
        out += [f"{api} answered {answer[1]}" for api, answer in self.admin.items() if answer and answer[1] != "NONE"]
        out += [f"broker {b} exited by itself" for b in self.exited]
        if self.group_measured and self.group_s is None:
            out.append("the group did not rebalance without its dead member in time")
        if self.txn_measured and self.txn_s is None:
            out.append("open transactions were not decided in time")
        return out

    @property
    def ok(self) -> bool:
        return not self.violations()

    def summary(self) -> str:
        heal = "-" if self.heal_s is None else f"{self.heal_s:.1f}"
        admin = " ".join(f"{api} {'-' if a is None else f'{a[0]:.1f}'}" for api, a in self.admin.items())
        group = ""
        if self.group_measured:
            group = f", group rebalanced {'-' if self.group_s is None else f'{self.group_s:.1f}'} s after the kill"
        return f"heal {heal} s ({admin}){group}"


def exited_by_themselves(brokers) -> list[str]:
    """Brokers not running whose exit was not a SIGKILL (returncode -9). Only broker processes
    of this machine are judged (a container has no process here)."""
    out = []
    for i, b in brokers.items():
        process = getattr(b, "process", None)
        if process is not None and process.poll() is not None and process.returncode != -9:
            out.append(f"{i} (exit {process.returncode})")
    return out


async def measure(env, healed_at: float) -> Liveness:
    """Judge `env` (chaos.runner.Env) from `healed_at` (trio's clock) on."""
    result = Liveness(exited=exited_by_themselves(env.brokers))
    async with Cluster.open(env.bootstrap, security=env.security, retries=60, backoff_ms=100) as cluster:

        async def metadata_shows(predicate) -> bool:
            conn = await cluster.any_connection()
            return predicate(await conn.request(ApiKey.METADATA, {"topics": None}, timeout_s=5))

        result.leaders_s = await _until(healed_at, LEADERS_BOUND_S, lambda: metadata_shows(_all_led))
        result.replicated_s = await _until(healed_at, REPLICATED_BOUND_S, lambda: metadata_shows(_fully_replicated))
        probe = f"liveness-{env.topic}"  # one per scenario: a cluster may serve several in turn
        result.admin["CreateTopics"] = await _until_done(lambda: _create_topic(cluster, probe))
        result.admin["DeleteTopics"] = await _until_done(lambda: _delete_topic(cluster, probe))
        result.admin["InitProducerId"] = await _timed(_init_producer_id(cluster), INIT_PRODUCER_ID_BOUND_S)
    result.exited += [e for e in exited_by_themselves(env.brokers) if e not in result.exited]
    return result


async def group_rebalanced(env, group_id: str, since: float, survivors: int, bound_s: float) -> float | None:
    """Seconds from `since` until `group_id` is Stable with `survivors` members (None: not within
    `bound_s` of `since`)."""
    from client.groups import describe_group

    async with Cluster.open(env.bootstrap, security=env.security, retries=5, backoff_ms=100) as cluster:

        async def rebalanced() -> bool:
            group = await describe_group(cluster, group_id)
            return group["state"] == "Stable" and len(group["members"]) == survivors

        return await _until(since, bound_s, rebalanced)


async def transactions_decided(env, topic: str, partitions: int, since: float, bound_s: float) -> float | None:
    """Seconds from `since` until every partition of `topic` has its LSO at its HW (None: not
    within `bound_s` of `since`)."""
    from client.reads import LATEST, READ_COMMITTED, list_offset

    async with Cluster.open(env.bootstrap, security=env.security, retries=5, backoff_ms=100) as cluster:

        async def decided() -> bool:
            ends = [await list_offset(cluster, topic, p, LATEST) for p in range(partitions)]
            return ends == [await list_offset(cluster, topic, p, LATEST, READ_COMMITTED) for p in range(partitions)]

        return await _until(since, bound_s, decided)


async def _until(since: float, bound_s: float, condition) -> float | None:
    """Seconds from `since` (trio's clock) until `await condition()` is true, asked every 0.2 s,
    each try bounded to 5 s and its client errors counted as false; None when `bound_s` passed."""
    with trio.move_on_at(since + bound_s):
        while True:
            try:
                with trio.fail_after(5):
                    if await condition():
                        return trio.current_time() - since
            except (ConnectionClosed, KafkaError, trio.TooSlowError):
                pass
            await trio.sleep(0.2)
    return None


def _partitions(md):
    return [p for t in md.topics if t.error_code == 0 for p in t.partitions]


def _all_led(md) -> bool:
    return len(md.brokers) == 3 and all(p.leader_id >= 0 for p in _partitions(md))


def _fully_replicated(md) -> bool:
    return _all_led(md) and all(set(p.isr_nodes) == set(p.replica_nodes) for p in _partitions(md))


async def _timed(work, bound_s: float) -> tuple[float, str] | None:
    started = trio.current_time()
    with trio.move_on_after(bound_s):
        answer = await work
        return trio.current_time() - started, answer
    return None


async def _until_done(ask) -> tuple[float, str] | None:
    """Ask `await ask()` (an admin request to the controller) until it answers NONE or an error
    outside `ADMIN_TRANSIENT`: (seconds from the first try, that answer). An answer slower than
    the request's timeout plus `SLACK_S` is None (not answered in time); a transient answer (or a
    broken connection) still met `ADMIN_BOUND_S` after the first try is returned as
    "<answer> still after <bound> s". Every transient answer is printed (the chaos report keeps
    it). TOPIC_ALREADY_EXISTS after a REQUEST_TIMED_OUT is NONE: the timed-out try wrote the topic."""
    started = trio.current_time()
    last = None
    while True:
        try:
            answer = await _timed(ask(), ADMIN_TIMEOUT_MS / 1000 + SLACK_S)
        except (ConnectionClosed, KafkaError) as e:  # the controller moved or its connection broke
            answer = (0.0, f"no answer ({type(e).__name__})")
        if answer is None:
            return None
        if answer[1] == "TOPIC_ALREADY_EXISTS" and last == "REQUEST_TIMED_OUT":
            answer = (answer[0], "NONE")
        last = answer[1]
        elapsed = trio.current_time() - started
        if last not in ADMIN_TRANSIENT and not last.startswith("no answer"):
            return elapsed, last
        print(f"liveness probe: {last} {elapsed:.1f} s after the first try; asking again", flush=True)
        if elapsed > ADMIN_BOUND_S:
            return elapsed, f"{last} still after {ADMIN_BOUND_S:.0f} s"
        await trio.sleep(0.2)


async def _controller(cluster):
    md = await cluster.refresh_metadata([])
    return await cluster.broker_connection(md.controller_id)


async def _create_topic(cluster, name: str) -> str:
    body = {
        "topics": [{"name": name, "num_partitions": 1, "replication_factor": 3, "configs": []}],
        "timeout_ms": ADMIN_TIMEOUT_MS,
    }
    response = await (await _controller(cluster)).request(ApiKey.CREATE_TOPICS, body, timeout_s=30)
    return ErrorCode(response.topics[0].error_code).name


async def _delete_topic(cluster, name: str) -> str:
    body = {"topics": [{"name": name, "topic_id": ZERO_UUID}], "timeout_ms": ADMIN_TIMEOUT_MS}
    response = await (await _controller(cluster)).request(ApiKey.DELETE_TOPICS, body, timeout_s=30)
    return ErrorCode(response.responses[0].error_code).name


async def _init_producer_id(cluster) -> str:
    """FindCoordinator then InitProducerId for a fresh transactional id; coordinator-moving errors
    are retried as a client would (the bound covers the whole)."""
    retriable = {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
    while True:
        try:
            conn = await cluster.any_connection()
            found = await conn.request(
                ApiKey.FIND_COORDINATOR, {"key": "liveness-probe", "key_type": 1}, version=2, timeout_s=5
            )
            if found.error_code == 0:
                conn = await cluster.connect(found.host, found.port)
                response = await conn.request(
                    ApiKey.INIT_PRODUCER_ID,
                    {"transactional_id": "liveness-probe", "transaction_timeout_ms": 10_000},
                    timeout_s=30,
                )
                if response.error_code not in retriable:
                    return ErrorCode(response.error_code).name
        except (ConnectionClosed, KafkaError, trio.TooSlowError):
            pass
        await trio.sleep(0.2)
