"""coordinator/runtime.py, what both coordinators stand on, over a real replica manager and logs
in a temp dir (no process), on trio's autojump clock: ownership and its errors, a load
overtaken by a resignation installs nothing, the reload policy on a new leader epoch, the one
write path (an operation's records committed, then replayed; a failed or overtaken write leaves
the state as last committed and raises the error Kafka's coordinators answer), and the one
timer's periodic jobs."""

import pytest
import trio
import trio.testing
from broker_helpers import follower_fetch, leader_and_isr, replica_manager

from broker.coordinator_log import CoordinatorPartitionLog
from coordinator.runtime import CoordinatorResult, CoordinatorRuntime, WriteFailed
from protocol import record_batch as rb
from protocol.errors import ErrorCode

TOPIC = "__consumer_offsets"


@pytest.fixture
def rm(tmp_path):
    with replica_manager(tmp_path, min_insync_replicas=1) as manager:
        yield manager


class Loads:
    """The coordinator side of a runtime: what it loaded and unloaded."""

    def __init__(self) -> None:
        self.replayed: dict[int, list[bytes]] = {}
        self.unloaded: list[int] = []
        self.gate: trio.Event | None = None  # a load waits on it before installing
        self.runtime: CoordinatorRuntime

    async def load(self, partition: int, token: object) -> None:
        found: list[bytes] = []

        def on_batch(buf, pos, header) -> None:
            found.extend(r.value for r in rb.decode_records(buf, pos, header))

        if not await self.runtime.replay(partition, token, 1 << 20, on_batch):
            return
        if self.gate is not None:
            await self.gate.wait()
        if self.runtime.finish_loading(partition, token):
            self.replayed[partition] = found


def _runtime(rm, *, reload: bool) -> tuple[CoordinatorRuntime, Loads]:
    loads = Loads()
    loads.runtime = CoordinatorRuntime(
        TOPIC, CoordinatorPartitionLog(rm), loads.load, loads.unloaded.append, reload_on_new_epoch=reload
    )
    return loads.runtime, loads


def _owned(runtime: CoordinatorRuntime, partition: int, epoch: int = 0) -> None:
    """Own `partition` as a finished load would, without replaying it."""
    assert runtime.finish_loading(partition, runtime.begin_loading(partition, epoch))


async def test_election_loads_what_was_written_and_resignation_unloads(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    runtime, loads = _runtime(rm, reload=False)
    with pytest.raises(WriteFailed) as failed:
        await runtime.write(0, lambda: CoordinatorResult([(b"k", b"v0")], "done"))
    assert failed.value.error_code == ErrorCode.NOT_COORDINATOR
    _owned(runtime, 0)
    replayed: list[int] = []
    response = await runtime.write(0, lambda: CoordinatorResult([(b"k", b"v1"), (b"k", b"v2")], "ok", replayed.append))
    assert response == "ok" and replayed == [0]  # the records' first offset, once committed
    runtime.unload(0)
    loads.unloaded.clear()
    async with trio.open_nursery() as nursery:
        await runtime.run(nursery)
        assert runtime.on_election((TOPIC, 0), 3) and not runtime.on_election(("other", 0), 3)
        assert runtime.error_for(0) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await trio.sleep(1)
        assert loads.replayed == {0: [b"v1", b"v2"]}
        assert runtime.error_for(0) == ErrorCode.NONE and runtime.epoch_of(0) == 3
        runtime.on_resignation((TOPIC, 0), None)
        assert runtime.error_for(0) == ErrorCode.NOT_COORDINATOR and loads.unloaded == [0]


async def test_a_write_overtaken_by_a_reload_or_failed_replays_nothing(rm, autojump_clock):
    """min.insync.replicas 2 over an ISR of 1: NOT_ENOUGH_REPLICAS, told COORDINATOR_NOT_AVAILABLE;
    a follower that never fetches: the HW wait times out (COORDINATOR_NOT_AVAILABLE too); a
    reload while the append waits: NOT_COORDINATOR. `replay` is never called for any of them."""
    with replica_manager(rm.log_manager.log_dirs[0].parent / "min2") as strict:
        await strict.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1, 2])}), 7)
        runtime, _ = _runtime(strict, reload=True)
        _owned(runtime, 0)
        replayed: list[int] = []
        with pytest.raises(WriteFailed) as failed:
            await runtime.write(0, lambda: CoordinatorResult([(b"k", b"v")], "ok", replayed.append))
        assert failed.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and replayed == []

    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1, 2], [1, 2])}), 7)
    runtime, _ = _runtime(rm, reload=True)
    _owned(runtime, 0)
    replayed = []
    with pytest.raises(WriteFailed) as failed:
        await runtime.write(0, lambda: CoordinatorResult([(b"k", b"v")], "ok", replayed.append))
    assert failed.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE and replayed == []  # timed out
    told = {}

    async def overtaken() -> None:
        with pytest.raises(WriteFailed) as failed:
            await runtime.write(0, lambda: CoordinatorResult([(b"k", b"v")], "ok", replayed.append))
        told["error"] = failed.value.error_code

    async with trio.open_nursery() as nursery:
        nursery.start_soon(overtaken)
        await trio.sleep(0.1)
        runtime.begin_loading(0, 1)  # a new leader epoch reloads the partition meanwhile
        with pytest.raises(WriteFailed) as failed:
            await runtime.write(0, lambda: CoordinatorResult([], "nothing to write"))
        assert failed.value.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await rm.fetch(follower_fetch(TOPIC, 0, 2))  # the follower covers both appends: committed
    assert told == {"error": ErrorCode.NOT_COORDINATOR} and replayed == []


async def test_writes_of_one_key_take_turns_and_see_each_other(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    runtime, _ = _runtime(rm, reload=False)
    _owned(runtime, 0)
    state = {"n": 0}
    seen: list[int] = []

    def bump() -> CoordinatorResult[int]:
        seen.append(state["n"])  # the operation runs when the key's turn comes
        return CoordinatorResult([(b"n", str(state["n"] + 1).encode())], state["n"] + 1, replay)

    def replay(_: int) -> None:
        state["n"] += 1

    async def bump_in_turn() -> None:
        async with runtime.one_at_a_time("g"):
            await runtime.write(0, bump)

    async with trio.open_nursery() as nursery:
        async with runtime.one_at_a_time("g"):  # a heartbeat holding the group's turn
            for _ in range(3):
                nursery.start_soon(bump_in_turn)
            await trio.testing.wait_all_tasks_blocked()
            assert runtime.waiting("g") == 3 and seen == []
    assert seen == [0, 1, 2] and state["n"] == 3 and runtime.waiting("g") == 0


async def test_a_load_overtaken_by_a_resignation_installs_nothing(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    runtime, loads = _runtime(rm, reload=False)
    loads.gate = trio.Event()
    async with trio.open_nursery() as nursery:
        await runtime.run(nursery)
        runtime.on_election((TOPIC, 0), 1)
        await trio.sleep(1)
        runtime.on_resignation((TOPIC, 0), None)
        loads.gate.set()
        await trio.sleep(1)
    assert loads.replayed == {} and runtime.error_for(0) == ErrorCode.NOT_COORDINATOR


async def test_a_new_leader_epoch_reloads_only_when_asked_to(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    for reload in (False, True):
        runtime, loads = _runtime(rm, reload=reload)
        async with trio.open_nursery() as nursery:
            await runtime.run(nursery)
            runtime.on_election((TOPIC, 0), 1)
            await trio.sleep(1)
            assert runtime.on_election((TOPIC, 0), 2) is reload
            await trio.sleep(1)
            assert runtime.epoch_of(0) == 2 and loads.unloaded == ([0] if reload else [])


async def test_writes_to_a_partition_led_elsewhere_are_mapped_for_the_coordinators_client(rm, autojump_clock):
    await rm.become_leader_or_follower(leader_and_isr({(TOPIC, 1): (2, [2, 1], [2, 1])}), 7)
    runtime, _ = _runtime(rm, reload=False)
    for partition, told in ((1, ErrorCode.NOT_COORDINATOR), (5, ErrorCode.COORDINATOR_NOT_AVAILABLE)):
        _owned(runtime, partition)  # 1: NOT_LEADER_OR_FOLLOWER; 5: UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(WriteFailed) as failed:
            await runtime.write(partition, lambda: CoordinatorResult([(b"k", b"v")], "ok"))
        assert failed.value.error_code == told


async def test_the_one_timer_runs_each_job_at_its_interval_never_twice_at_once(rm, autojump_clock):
    runtime, _ = _runtime(rm, reload=False)
    quick: list[float] = []
    slow: list[float] = []

    async def slow_job() -> None:  # takes 2.5 intervals: the runs due meanwhile are skipped
        slow.append(trio.current_time())
        await trio.sleep(2.5)

    runtime.every(1.0, lambda: quick.append(trio.current_time()))
    runtime.every(1.0, slow_job)
    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        await runtime.run(nursery)
        await trio.sleep(6.5)
        nursery.cancel_scope.cancel()
    assert [t - start for t in quick] == [1, 2, 3, 4, 5, 6]
    assert [t - start for t in slow] == [1, 4]
