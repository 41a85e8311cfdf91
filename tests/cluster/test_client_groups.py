"""Our own group members (`client.groups.GroupMember`) against a real broker: cooperative-sticky
members keep their partitions through rebalances and converge to a balanced, complete
partitioning; and a mixed group of our member and a confluent-kafka cooperative-sticky consumer
works whichever of the two leads (each runs the other's assignment)."""

import time

import pytest
import trio
from group_helpers import GROUP_BROKER, create_topics
from test_consumer_group_rebalance import ALL, Member, wait_for_partitioning

from client import Cluster
from client.groups import GroupMember

pytestmark = pytest.mark.slow


async def run_member(bootstrap, name, owned: dict, stop: trio.Event, history: dict):
    """A member that only holds partitions: joins, rejoins when told, heartbeats."""
    async with Cluster.open(bootstrap) as cluster:
        member = GroupMember(cluster, "g", ["t12"], session_timeout_ms=6000, assignors=("cooperative-sticky",))
        while not stop.is_set():
            assignment = await member.join()
            owned[name] = {("t12", p) for p in assignment.get("t12", [])}
            history.setdefault(name, []).append(owned[name])
            if member.rejoin_needed:
                continue
            while not stop.is_set() and await member.heartbeat():
                await trio.sleep(0.3)
        await member.leave()


def complete(owned: dict, names) -> bool:
    sets = [owned.get(n) for n in names]
    return all(s is not None for s in sets) and sum(len(s) for s in sets) == 12 and set().union(*sets) == ALL


async def until(predicate, timeout=60):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.1)


async def test_cooperative_sticky_members_keep_their_partitions(start_broker):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"t12": 12})
    owned, history = {}, {}
    stops = {n: trio.Event() for n in "abcd"}
    async with trio.open_nursery() as nursery:
        for n in "abc":
            nursery.start_soon(run_member, broker.bootstrap, n, owned, stops[n], history)
        await until(lambda: complete(owned, "abc") and all(len(owned[n]) == 4 for n in "abc"))
        before = {n: set(owned[n]) for n in "abc"}
        nursery.start_soon(run_member, broker.bootstrap, "d", owned, stops["d"], history)
        await until(lambda: complete(owned, "abcd") and sorted(len(owned[n]) for n in "abcd") == [3, 3, 3, 3])
        for n in "abc":  # sticky: an old member only gave partitions up, it never got others
            assert all(step <= before[n] for step in history[n][-2:]), (n, before[n], history[n])
        stops["a"].set()  # a leaves: its partitions go to the others, who keep theirs
        kept = {n: set(owned[n]) for n in "bcd"}
        await until(lambda: complete(owned, "bcd") and sorted(len(owned[n]) for n in "bcd") == [4, 4, 4])
        assert all(kept[n] <= owned[n] for n in "bcd")
        for s in stops.values():
            s.set()


@pytest.mark.parametrize("ours_first", [True, False])
async def test_a_group_of_our_member_and_a_confluent_member(start_broker, ours_first):
    broker = start_broker(1, **GROUP_BROKER)
    create_topics(broker.bootstrap, {"t12": 12})
    owned, history, stop = {}, {}, trio.Event()
    theirs = None
    async with trio.open_nursery() as nursery:
        if not ours_first:
            theirs = Member(broker.bootstrap, assignor="cooperative-sticky")
            await trio.to_thread.run_sync(wait_for_partitioning, [theirs])
        nursery.start_soon(run_member, broker.bootstrap, "ours", owned, stop, history)
        if ours_first:
            await until(lambda: len(owned.get("ours", ())) == 12)
            theirs = Member(broker.bootstrap, assignor="cooperative-sticky")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                mine, other = owned.get("ours"), theirs.assigned
                if mine is not None and other is not None and len(mine) == len(other) == 6 and mine | other == ALL:
                    break
                await trio.sleep(0.1)
            assert len(owned["ours"]) == 6 and owned["ours"] | theirs.assigned == ALL, (owned, theirs.assigned)
        finally:
            stop.set()
            await trio.to_thread.run_sync(theirs.stop)
