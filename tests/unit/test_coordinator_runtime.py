"""coordinator/runtime.py, what both coordinators stand on, over a real replica manager and logs
in a temp dir (no process), on trio's autojump clock: ownership and its errors, a load
overtaken by a resignation installs nothing, the reload policy on a new leader epoch, replay of
what was appended through the one append path, and the one timer's periodic jobs."""

import pytest
import trio
from broker_helpers import leader_and_isr, replica_manager

from broker.coordinator_log import CoordinatorPartitionLog
from coordinator.runtime import CoordinatorRuntime
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


async def test_election_loads_what_was_appended_and_resignation_unloads(rm, autojump_clock):
    rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    runtime, loads = _runtime(rm, reload=False)
    assert runtime.error_for(0) == ErrorCode.NOT_COORDINATOR
    outcome = await runtime.append(0, rb.build_batch([(b"k", b"v1"), (b"k", b"v2")]), 1000)
    assert outcome == (ErrorCode.NONE, 0, None)
    async with trio.open_nursery() as nursery:
        await runtime.run(nursery)
        assert runtime.on_election((TOPIC, 0), 3) and not runtime.on_election(("other", 0), 3)
        assert runtime.error_for(0) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await trio.sleep(1)
        assert loads.replayed == {0: [b"v1", b"v2"]}
        assert runtime.error_for(0) == ErrorCode.NONE and runtime.epoch_of(0) == 3
        runtime.on_resignation((TOPIC, 0), None)
        assert runtime.error_for(0) == ErrorCode.NOT_COORDINATOR and loads.unloaded == [0]


async def test_a_load_overtaken_by_a_resignation_installs_nothing(rm, autojump_clock):
    rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
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
    rm.become_leader_or_follower(leader_and_isr({(TOPIC, 0): (1, [1], [1])}), 7)
    for reload in (False, True):
        runtime, loads = _runtime(rm, reload=reload)
        async with trio.open_nursery() as nursery:
            await runtime.run(nursery)
            runtime.on_election((TOPIC, 0), 1)
            await trio.sleep(1)
            assert runtime.on_election((TOPIC, 0), 2) is reload
            await trio.sleep(1)
            assert runtime.epoch_of(0) == 2 and loads.unloaded == ([0] if reload else [])


async def test_appends_to_a_partition_led_elsewhere_are_mapped_for_the_coordinators_client(rm, autojump_clock):
    rm.become_leader_or_follower(leader_and_isr({(TOPIC, 1): (2, [2, 1], [2, 1])}), 7)
    runtime, _ = _runtime(rm, reload=False)
    assert (await runtime.append(1, rb.build_batch([(b"k", b"v")]), 1000)).error == ErrorCode.NOT_COORDINATOR
    assert (await runtime.append(5, rb.build_batch([(b"k", b"v")]), 1000)).error == (
        ErrorCode.COORDINATOR_NOT_AVAILABLE  # UNKNOWN_TOPIC_OR_PARTITION
    )


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
