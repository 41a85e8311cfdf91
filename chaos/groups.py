"""The consumer group part of the chaos workload: a group of consumers (our `client.groups`
members: join, sync with the range assignor, heartbeat, commit after every fetch round; or
`client.consumer_group_member` members of KIP-848's consumer protocol, or one of each: a group
mid-migration) reading the chaos topic, an observer of the group's committed offsets, and the
nemesis that kills the group's coordinator.

History events added (see chaos/checker.py):
  gread     {consumer, partition, offset, value}   a group member read a record
  committed {partition, offset}                    the observer read the group's committed offset
"""

from __future__ import annotations

import trio

from chaos import liveness
from client import Cluster, ConnectionClosed, KafkaError
from client.consumer_group_member import ConsumerGroupMember
from client.groups import GroupMember, committed_offsets
from client.reads import EARLIEST, fetch_records
from coordinator.group.records import partition_for
from protocol import record_batch as rb

GROUP = "chaos-group"
OFFSETS_PARTITIONS = 3  # offsets.topic.num.partitions of the chaos cluster
ERRORS = (KafkaError, ConnectionClosed, trio.TooSlowError)


async def group_consumer_task(env, name: str, topic: str, stop: trio.Event, protocol: str = "classic") -> None:
    """One member of `protocol` ("classic" or "consumer"): (re)join, read the assigned
    partitions from the committed offsets (earliest when none), commit after every round that
    read something, heartbeat every second (classic) or at the interval the broker asks."""
    with trio.CancelScope() as scope:  # cancelled: the member's process "dies" (no LeaveGroup)
        env.member_scopes[name] = scope
        await _member(env, name, topic, stop, protocol)


SESSION_TIMEOUT_MS = 6000  # the members' session.timeout.ms
#: the broker keys of the consumer-protocol scenarios: the same session timeout for those members
CONSUMER_PROTOCOL_KEYS = {
    "group.consumer.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}
#: the members' rebalance timeout (max.poll.interval.ms; Kafka's clients default to 300 s): longer
#: than a session, so that a dead member must be removed by its session's end, not by the rebalance
REBALANCE_TIMEOUT_MS = 60_000


async def _member(env, name: str, topic: str, stop: trio.Event, protocol: str) -> None:
    async with Cluster.open(env.bootstrap, security=env.security, retries=30, backoff_ms=100) as cluster:
        member: GroupMember | ConsumerGroupMember
        if protocol == "consumer":
            member = ConsumerGroupMember(cluster, GROUP, [topic], rebalance_timeout_ms=REBALANCE_TIMEOUT_MS)
        else:
            member = GroupMember(
                cluster,
                GROUP,
                [topic],
                session_timeout_ms=SESSION_TIMEOUT_MS,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            )
        while not stop.is_set():
            try:
                await member.join()
                if member.rejoin_needed:
                    continue
                positions = await member.starting_positions(topic, EARLIEST)
                interval_s = getattr(member, "heartbeat_interval_s", 1.0)
                next_heartbeat = trio.current_time() + interval_s
                while not stop.is_set():
                    progressed = False
                    for p in sorted(positions):
                        data = await fetch_records(cluster, topic, p, positions[p], max_wait_ms=100, max_bytes=1 << 20)
                        for pos, header in rb.iter_batches(data, allow_partial_tail=True):
                            for record in rb.decode_records(data, pos, header):
                                if record.offset >= positions[p]:
                                    env.record(
                                        op="gread", consumer=name, partition=p, offset=record.offset, value=record.value
                                    )
                            if header.next_offset > positions[p]:
                                positions[p] = header.next_offset
                                progressed = True
                    if not positions:
                        await trio.sleep(0.2)
                    if progressed and not await member.commit({(topic, p): o for p, o in positions.items()}):
                        break
                    if trio.current_time() >= next_heartbeat:
                        if not await member.heartbeat():
                            break
                        interval_s = getattr(member, "heartbeat_interval_s", 1.0)
                        next_heartbeat = trio.current_time() + interval_s
            except ERRORS:
                await trio.sleep(0.2)
        with trio.move_on_after(5):
            await member.leave()


async def committed_observer_task(env, topic: str, stop: trio.Event) -> None:
    """Read the group's committed offsets every 0.3 s (from whichever broker coordinates it)."""
    async with Cluster.open(env.bootstrap, security=env.security, retries=0) as cluster:
        while not stop.is_set():
            try:
                with trio.fail_after(5):
                    found = await committed_offsets(cluster, GROUP)
                for (t, p), offset in sorted(found.items()):
                    if t == topic and offset >= 0:
                        env.record(op="committed", partition=p, offset=offset)
                env.last_committed = {p: o for (t, p), o in found.items() if t == topic}
            except ERRORS:
                pass
            await trio.sleep(0.3)


async def coordinator_of(env) -> int:
    """The broker leading the group's `__consumer_offsets` partition (-1 when unknown)."""
    for b in env.brokers.values():
        if not b.alive:
            continue
        try:
            async with Cluster.open(b.bootstrap, retries=0, security=env.security) as cluster:
                md = await cluster.refresh_metadata(["__consumer_offsets"])
                info = md.topics.get("__consumer_offsets", {}).get(partition_for(GROUP, OFFSETS_PARTITIONS))
                return info.leader if info else -1
        except ERRORS:
            continue
    return -1


async def kill_member_and_coordinator(env) -> str:
    """One member dies (its task ends without LeaveGroup, its connections close) and, in the same
    fault, the group's coordinator is killed (restarted 4 s later): the new coordinator loads the
    dead member from `__consumer_offsets` and must expire it after its session, so that the
    surviving member takes every partition (judged by `chaos.liveness.group_rebalanced`)."""
    victim = await coordinator_of(env)
    env.member_scopes["g1"].cancel()
    env.member_killed_at = trio.current_time()
    if victim < 0:
        env.group_rebalance_s = None
        return "killed member g1; no coordinator found"
    env.brokers[victim].kill()
    await trio.sleep(4)
    await env.restart(victim)
    env.group_rebalance_s = await liveness.group_rebalanced(
        env, GROUP, env.member_killed_at, survivors=1, bound_s=SESSION_TIMEOUT_MS / 1000 + 15
    )
    return f"killed member g1 and the group's coordinator {victim} together (restarted after 4 s)"


async def kill_coordinator(env) -> str:
    """kill -9 of the group's coordinator; it restarts 4 s later; then a random other broker is
    killed (it comes back at heal)."""
    victim = await coordinator_of(env)
    if victim < 0:
        return "no coordinator found"
    env.brokers[victim].kill()
    await trio.sleep(4)
    await env.restart(victim)
    await trio.sleep(3)
    second = await coordinator_of(env)
    other = env.rng.choice([b for b in env.brokers if b != victim])
    env.brokers[other].kill()
    return f"killed coordinator {victim} (restarted after 4 s), then broker {other} (new coordinator was {second})"


async def mixed_group_formed(env, bound_s: float = 30) -> bool:
    """Whether the group became a consumer group holding both members (one of them a classic
    member: the group is mid-migration), within `bound_s`."""
    from client.groups import describe_group

    async with Cluster.open(env.bootstrap, security=env.security, retries=5, backoff_ms=100) as cluster:
        with trio.move_on_after(bound_s):
            while True:
                try:
                    group = await describe_group(cluster, GROUP)
                    if group["type"] == "consumer" and len(group["members"]) == 2:
                        return True
                except ERRORS:
                    pass
                await trio.sleep(0.2)
    return False
