"""The controller with real ZooKeeper and three real broker processes."""

import collections
import json
import signal
import subprocess
import time

import pytest
import trio
from replication_helpers import controller_of

from client import Cluster
from client.connection import Connection
from protocol.errors import ErrorCode


@pytest.fixture
async def three(start_broker):
    from replication_helpers import wait_until_all_brokers_known

    brokers = {i: start_broker(i) for i in (1, 2, 3)}
    await wait_until_all_brokers_known(brokers)
    return brokers


async def wait_until(predicate, timeout_s=20.0, interval=0.05):
    start = trio.current_time()
    with trio.fail_after(timeout_s):
        while True:
            value = await trio.to_thread.run_sync(predicate) if getattr(predicate, "_sync", False) else predicate()
            if value:
                return trio.current_time() - start
            await trio.sleep(interval)


async def metadata(broker, topics=None):
    async with Connection.open(broker.host, broker.port) as conn:
        return await conn.request(
            3, {"topics": None if topics is None else [{"name": t} for t in topics], "allow_auto_topic_creation": False}
        )


def leaders(md, topic):
    t = next(t for t in md.topics if t.name == topic)
    return {p.partition_index: (p.leader_id, p.leader_epoch, tuple(p.isr_nodes)) for p in t.partitions}


async def create_topic(broker, name, partitions=6, rf=3, configs=None, retry_not_controller=True):
    """CreateTopics; NOT_CONTROLLER is retried (as clients do) while a new controller finishes its
    failover: /controller names it a moment before it is active."""
    with trio.fail_after(15):
        while True:
            async with Connection.open(broker.host, broker.port) as conn:
                r = await conn.request(
                    19,
                    {
                        "topics": [
                            {
                                "name": name,
                                "num_partitions": partitions,
                                "replication_factor": rf,
                                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                            }
                        ],
                        "timeout_ms": 10000,
                    },
                )
            if r.topics[0].error_code != ErrorCode.NOT_CONTROLLER or not retry_not_controller:
                return r.topics[0]
            await trio.sleep(0.05)


async def all_agree(brokers, topic):
    """Every broker's Metadata gives the same leaders; returns them."""
    views = [leaders(await metadata(b, [topic]), topic) if b.alive else None for b in brokers]
    views = [v for v in views if v is not None]
    return views[0] if views and all(v == views[0] for v in views) and views[0] else None


async def test_one_controller_failover_and_epoch(three, zk):
    await wait_until(lambda: controller_of(zk) is not None and zk.exists("/controller_epoch"))
    first = controller_of(zk)
    epoch = int(zk.get("/controller_epoch")[0])
    assert zk.exists("/controller").czxid == zk.exists("/controller_epoch").mzxid
    # every broker learns the controller id from UpdateMetadata
    for b in three.values():
        with trio.fail_after(10):
            while (await metadata(b)).controller_id != first:
                await trio.sleep(0.05)
    three[first].kill()
    start = time.monotonic()
    await wait_until(lambda: controller_of(zk) not in (None, first), timeout_s=30)
    elapsed = time.monotonic() - start
    print(f"controller failover after kill -9: {elapsed:.2f} s (session timeout 3 s)")
    # the new controller's /controller and its epoch are written by one multi-op (one zxid), so
    # nobody ever reads a /controller whose epoch is the previous controller's
    assert int(zk.get("/controller_epoch")[0]) == epoch + 1
    assert zk.exists("/controller").czxid == zk.exists("/controller_epoch").mzxid
    assert elapsed < 3 + 3  # zookeeper.session.timeout.ms + a measured bound (~0.5 s seen)


async def test_create_topic_spreads_leaders_and_metadata_agrees(three, zk):
    await wait_until(lambda: controller_of(zk) is not None)
    controller = three[controller_of(zk)]
    other = next(b for i, b in three.items() if i != controller.broker_id)
    assert (await create_topic(other, "t", retry_not_controller=False)).error_code == ErrorCode.NOT_CONTROLLER
    result = await create_topic(controller, "t")
    assert result.error_code == ErrorCode.NONE and result.num_partitions == 6 and result.replication_factor == 3
    for name, partitions, rf, code in (
        ("t", 1, 1, ErrorCode.TOPIC_ALREADY_EXISTS),
        ("bad/name", 1, 1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x", 1, 4, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("y", 0, 1, ErrorCode.INVALID_PARTITIONS),
    ):
        assert (await create_topic(controller, name, partitions, rf)).error_code == code, name
    assert (await create_topic(controller, "z", 1, 1, {"retention.ms": "soon"})).error_code == ErrorCode.INVALID_CONFIG
    view = None
    with trio.fail_after(10):
        while not (view := await all_agree(list(three.values()), "t")):
            await trio.sleep(0.05)
    assert collections.Counter(leader for leader, _, _ in view.values()) == {1: 2, 2: 2, 3: 2}
    assert all(sorted(isr) == [1, 2, 3] for _, _, isr in view.values())
    assert json.loads(zk.get("/brokers/topics/t/partitions/0/state")[0])["leader"] == view[0][0]
    kcat = subprocess.run(
        ["kcat", "-L", "-b", controller.bootstrap, "-t", "t"], capture_output=True, text=True, timeout=30
    )
    assert 'topic "t" with 6 partitions' in kcat.stdout and "3 brokers" in kcat.stdout


async def kill_a_leader(three, zk, topic, partitions, before_kill=None):
    """Create `topic`, kill -9 a broker (not the controller) that leads some of its partitions
    (calling `before_kill(led partitions)` first), and wait until the survivors agree on new
    leaders and ISRs without it. Returns (leaders before, leaders after, victim id, led)."""
    await wait_until(lambda: controller_of(zk) is not None)
    controller_id = controller_of(zk)
    assert (await create_topic(three[controller_id], topic, partitions=partitions)).error_code == 0
    with trio.fail_after(10):
        while not (before := await all_agree(list(three.values()), topic)):
            await trio.sleep(0.05)
    victim = next(leader for leader, _, _ in before.values() if leader != controller_id)
    led = [p for p, (leader, _, _) in before.items() if leader == victim]
    if before_kill is not None:
        before_kill(led)
    three[victim].kill()
    survivors = [b for i, b in three.items() if i != victim]
    with trio.fail_after(20):
        # the controller elects new leaders first, then takes the dead broker out of the other ISRs
        while True:
            view = await all_agree(survivors, topic)
            if (
                view
                and all(view[p][0] not in (victim, -1) for p in led)
                and all(victim not in isr for _, _, isr in view.values())
            ):
                return before, view, victim, led
            await trio.sleep(0.05)


async def test_leader_failover_and_restart_as_follower(three, zk):
    before, view, victim, led = await kill_a_leader(three, zk, "t", 3)
    for p in led:
        assert view[p][1] == before[p][1] + 1 and view[p][0] in before[p][2]
    for _leader, _epoch, isr in view.values():
        assert victim not in isr
    await trio.to_thread.run_sync(three[victim].start)
    with trio.fail_after(15):
        while True:
            md = await metadata(three[victim], ["t"])
            if md.topics and md.topics[0].error_code == 0 and len(md.brokers) == 3:
                break
            await trio.sleep(0.05)
    assert all(leader != victim for leader, _, _ in leaders(md, "t").values())  # back as a follower
    assert (three[victim].directory / "logs" / "t-0").exists()


async def topic_t_everywhere(three, zk) -> int:
    """Topic "t" (6 partitions, RF 3) created and named alike by every broker; returns the controller's id."""
    await wait_until(lambda: controller_of(zk) is not None)
    controller_id = controller_of(zk)
    assert (await create_topic(three[controller_id], "t", partitions=6)).error_code == 0
    with trio.fail_after(10):
        while not await all_agree(list(three.values()), "t"):
            await trio.sleep(0.05)
    return controller_id


async def test_controlled_shutdown_leaves_no_partition_leaderless(three, zk):
    controller_id = await topic_t_everywhere(three, zk)
    victim = next(i for i in three if i != controller_id)
    observer = three[controller_id]
    leaderless = []
    done = trio.Event()

    async def poll():
        while not done.is_set():
            md = await metadata(observer, ["t"])
            for p in md.topics[0].partitions:
                if p.leader_id < 0 or p.error_code != 0:
                    leaderless.append(p.partition_index)
            await trio.sleep(0.005)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        assert await trio.to_thread.run_sync(three[victim].stop) == 0
        await trio.sleep(0.5)
        done.set()
    assert not leaderless
    view = leaders(await metadata(observer, ["t"]), "t")
    assert all(leader != victim for leader, _, _ in view.values())
    assert "controlled shutdown succeeded" in three[victim].log_tail(100000)


async def test_a_controller_stopped_by_sigterm_leaves_the_others_naming_its_successors(three, zk):
    """The controller's own controlled shutdown: by the time its process has exited, the other
    brokers already name other leaders and ISRs without it (it waited for their answers to its
    last LeaderAndIsr/UpdateMetadata; the next controller is elected only after it is gone)."""
    controller_id = await topic_t_everywhere(three, zk)
    assert any(
        leader == controller_id for leader, _, _ in leaders(await metadata(three[controller_id], ["t"]), "t").values()
    )
    assert await trio.to_thread.run_sync(three[controller_id].stop) == 0
    for observer in (b for i, b in three.items() if i != controller_id):
        view = leaders(await metadata(observer, ["t"]), "t")
        assert all(
            leader not in (-1, controller_id) and controller_id not in isr for leader, _, isr in view.values()
        ), view
    assert "controlled shutdown succeeded" in three[controller_id].log_tail(100000)


async def test_zombie_controller_cannot_act(three, zk):
    await wait_until(lambda: controller_of(zk) is not None and zk.exists("/controller_epoch"))
    old = controller_of(zk)
    epoch = int(zk.get("/controller_epoch")[0])
    three[old].process.send_signal(signal.SIGSTOP)
    try:
        await wait_until(lambda: controller_of(zk) not in (None, old), timeout_s=30)
        new = controller_of(zk)
        assert (await create_topic(three[new], "t", partitions=2, rf=2)).error_code == 0
    finally:
        three[old].process.send_signal(signal.SIGCONT)
    await wait_until(lambda: "resigns as controller" in three[old].log_tail(200000), timeout_s=20)
    assert int(zk.get("/controller_epoch")[0]) == epoch + 1 and controller_of(zk) == new
    # whatever the zombie might still send carries the old epoch, and brokers refuse it
    async with Connection.open(three[new].host, three[new].port) as conn:
        r = await conn.request(
            6,
            {
                "controller_id": old,
                "controller_epoch": epoch,
                "broker_epoch": zk.get(f"/brokers/ids/{new}")[1].czxid,
                "topic_states": [],
                "live_brokers": [],
            },
        )
    assert r.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    with trio.fail_after(15):
        while not await all_agree(list(three.values()), "t"):
            await trio.sleep(0.05)


async def test_delete_topic_everywhere(three, zk):
    await wait_until(lambda: controller_of(zk) is not None)
    controller = three[controller_of(zk)]
    assert (await create_topic(controller, "gone", partitions=3)).error_code == 0
    with trio.fail_after(10):
        while not await all_agree(list(three.values()), "gone"):
            await trio.sleep(0.05)
    dirs = [b.directory / "logs" / f"gone-{p}" for b in three.values() for p in range(3)]
    assert all(d.exists() for d in dirs)
    async with Connection.open(controller.host, controller.port) as conn:
        r = await conn.request(20, {"topic_names": ["gone", "never"], "timeout_ms": 10000}, version=5)
    assert [(x.name, x.error_code) for x in r.responses] == [
        ("gone", 0),
        ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    with trio.fail_after(10):
        while any(d.exists() for d in dirs):
            await trio.sleep(0.05)
    for b in three.values():
        md = await metadata(b, ["gone"])
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not zk.exists("/brokers/topics/gone") and not zk.exists("/admin/delete_topics/gone")


async def test_metadata_auto_creates_topics(three, zk):
    await wait_until(lambda: controller_of(zk) is not None)
    broker = three[1]
    async with Cluster.open(broker.bootstrap) as cluster:
        conn = await cluster.any_connection()
        r = await conn.request(3, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
        assert r.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        with trio.fail_after(10):
            while (await conn.request(3, {"topics": [{"name": "auto"}]})).topics[0].error_code != 0:
                await trio.sleep(0.05)


async def test_preferred_replica_election_through_zookeeper(three, zk):
    await wait_until(lambda: controller_of(zk) is not None)
    controller = three[controller_of(zk)]
    assert (await create_topic(controller, "p", partitions=3)).error_code == 0
    with trio.fail_after(10):
        while not await all_agree(list(three.values()), "p"):
            await trio.sleep(0.05)
    zk.create(
        "/admin/preferred_replica_election",
        json.dumps({"version": 1, "partitions": [{"topic": "p", "partition": 0}]}).encode(),
        makepath=True,
    )
    await wait_until(lambda: not zk.exists("/admin/preferred_replica_election"), timeout_s=10)
    assert "preferred replica election {'p-0': 'ELECTION_NOT_NEEDED'}" in controller.log_tail(200000)


@pytest.mark.slow
async def test_brokers_keep_serving_while_zookeeper_is_down(tmp_path):
    """A ZooKeeper of its own: stop it, the broker keeps serving with its last metadata; start it
    again on the same port and the broker's session carries on."""
    from local_cluster.brokers import BrokerProcess
    from local_cluster.zookeeper import ZooKeeperProcess

    zk_proc = ZooKeeperProcess.start(tmp_path / "zk")
    broker = BrokerProcess.create(1, tmp_path / "b1", zk_proc.connect, zookeeper_session_timeout_ms="10000")
    try:
        await trio.to_thread.run_sync(broker.start)
        assert (await create_topic(broker, "t", partitions=1, rf=1)).error_code == 0
        with trio.fail_after(10):
            while not await all_agree([broker], "t"):
                await trio.sleep(0.05)
        zk_proc.kill()
        await wait_until(lambda: "serving with the last known metadata" in broker.log_tail(100000))
        lines = "".join(f"k{i}:v{i}\n" for i in range(5))
        p = subprocess.run(
            ["kcat", "-P", "-b", broker.bootstrap, "-t", "t", "-K", ":"],
            input=lines,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert p.returncode == 0, p.stderr
        c = subprocess.run(
            ["kcat", "-C", "-b", broker.bootstrap, "-t", "t", "-o", "beginning", "-e", "-f", "%s\\n"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert c.stdout.split() == [f"v{i}" for i in range(5)]
        zk_proc = await trio.to_thread.run_sync(lambda: ZooKeeperProcess.start(tmp_path / "zk", port=zk_proc.port))
        await wait_until(lambda: "ZooKeeper connection re-established" in broker.log_tail(100000), timeout_s=20)
        assert broker.alive
    finally:
        broker.kill()
        zk_proc.kill()


async def test_a_stale_partition_znode_version_falls_back_to_reread_and_still_elects(three, zk):
    # The controller writes all leadership changes of a broker failure pipelined, each conditional
    # on the zkVersion it holds. Bump one partition's zkVersion behind its back (same data): that
    # write loses the race, and the one-at-a-time path re-reads and elects anyway.
    def bump(led):
        data, stat = zk.get(f"/brokers/topics/race/partitions/{led[0]}/state")
        zk.set(f"/brokers/topics/race/partitions/{led[0]}/state", data, version=stat.version)

    before, view, victim, led = await kill_a_leader(three, zk, "race", 6, before_kill=bump)
    state = json.loads(zk.get(f"/brokers/topics/race/partitions/{led[0]}/state")[0])
    assert state["leader"] not in (victim, -1) and state["leader_epoch"] == before[led[0]][1] + 1


@pytest.mark.slow  # it starts its own ZooKeeper and brokers, without the process fixtures that mark the others
def test_brokers_started_together_are_all_live_at_the_controller(tmp_path):
    """Three brokers launched at once register while the first controller is still loading:
    BrokerChange notifications queued before its context load must not take registered brokers
    out of the live set (it once kept one out, and CreateTopics refused replication factor 3
    just after Metadata showed all three brokers). Several rounds, each on a fresh ZooKeeper."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from local_cluster.brokers import BrokerProcess, start_all
    from local_cluster.zookeeper import ZooKeeperProcess

    for round_ in range(4):
        zk = ZooKeeperProcess.start(tmp_path / f"zk-{round_}")
        brokers = [BrokerProcess.create(i, tmp_path / f"r{round_}-b{i}", zk.connect) for i in (1, 2, 3)]
        try:
            start_all(brokers)
            admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in brokers)})
            deadline = time.monotonic() + 30
            while len(admin.list_topics(timeout=10).brokers) < 3:
                assert time.monotonic() < deadline, "Metadata never listed 3 brokers"
                time.sleep(0.05)
            future = admin.create_topics([NewTopic("all-three", 3, 3)], operation_timeout=10)["all-three"]
            assert future.result(30) is None  # raises INVALID_REPLICATION_FACTOR if one is not live
        finally:
            for broker in brokers:
                broker.kill()
            zk.stop()
