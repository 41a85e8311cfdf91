"""What a replica fetcher (broker/replica_fetcher.py) asks its leader for, in an incremental fetch
session (KIP-227): an idle partition's fields are built once and reused (the session finds them
unchanged by identity), a partition whose log moved is listed again with its new fields, and
a request looks only at the partitions marked since the last one, except once every
`REBUILD_S`."""

from types import SimpleNamespace

import trio
import trio.testing

from broker.replica_fetcher import REBUILD_S, FetchState, ReplicaFetcher
from protocol.errors import ErrorCode

CONFIG = {
    "replica.fetch.backoff.ms": 1000,
    "replica.fetch.max.bytes": 1 << 20,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.response.max.bytes": 10 << 20,
}


class RecordingLeader:
    """Answers every Fetch in session 7, with the partition answers queued in `next` (none:
    nothing new); keeps the bodies."""

    def __init__(self):
        self.bodies = []
        self.next: list = []  # (partition, records) for the next answer

    def version_for(self, api_key):
        return 12

    async def request(self, api_key, body, timeout_s):
        self.bodies.append(body)
        parts = [
            SimpleNamespace(partition_index=i, error_code=0, records=r, high_watermark=0, log_start_offset=0)
            for i, r in self.next
        ]
        self.next = []
        responses = [SimpleNamespace(topic="t", partitions=parts)] if parts else []
        return SimpleNamespace(error_code=ErrorCode.NONE, session_id=7, responses=responses)


def follower_partition(index: int):
    """A followed partition whose follower append moves its LEO by the records' count (an int)
    and its latest epoch to 4 when there are more than 100."""
    log = SimpleNamespace(log_end_offset=100 + index, log_start_offset=0, epoch_cache=SimpleNamespace(latest_epoch=3))

    def append_records_as_follower(records, high_watermark, log_start_offset):
        log.log_end_offset += records
        if records > 100:
            log.epoch_cache.latest_epoch = 4

    return SimpleNamespace(
        tp=("t", index), leader_epoch=3, log=log, append_records_as_follower=append_records_as_follower
    )


def fetcher(partitions: int):
    f = ReplicaFetcher(2, 1, "127.0.0.1", 9092, dict(CONFIG), lambda tp: None, lambda log_dir: None)
    for i in range(partitions):
        f.partitions[("t", i)] = FetchState(follower_partition(i), 3, truncated=True)
    return f


def listed(body):
    return {(t["topic"], p["partition"]): p for t in body["topics"] for p in t["partitions"]}


def test_idle_partitions_reuse_their_fields_and_are_left_out_of_incremental_fetches():
    f, leader = fetcher(3), RecordingLeader()

    async def main():
        await f._fetch(leader)
        first = {tp: s.fields for tp, s in f.partitions.items()}
        await f._fetch(leader)
        await f._fetch(leader)
        assert {tp: s.fields for tp, s in f.partitions.items()} == first
        assert all(f.partitions[tp].fields is fields for tp, fields in first.items())

    trio.run(main)
    full, *incremental = leader.bodies
    assert full["session_epoch"] == 0 and sorted(listed(full)) == [("t", 0), ("t", 1), ("t", 2)]
    assert [b["session_epoch"] for b in incremental] == [1, 2]
    assert all(listed(b) == {} and b["forgotten_topics_data"] == [] for b in incremental)


def test_a_partition_whose_log_moved_is_listed_again_with_its_new_fields():
    f, leader = fetcher(3), RecordingLeader()

    async def main():
        await f._fetch(leader)
        leader.next = [(1, 50)]  # records for t-1: its follower append moves its LEO to 151
        await f._fetch(leader)
        await f._fetch(leader)
        leader.next = [(0, 200)]  # t-0: its LEO and its latest epoch move
        await f._fetch(leader)
        await f._fetch(leader)
        moved = follower_partition(0)  # LeaderAndIsr: a new leader epoch, truncated as run() does
        moved.leader_epoch = 5
        f.add(moved)
        f.partitions[("t", 0)].truncated = True
        await f._fetch(leader)

    trio.run(main, clock=trio.testing.MockClock())  # no REBUILD_S passes: only marked partitions
    _, _, moved, _, two, epoch = leader.bodies
    assert listed(moved) == {("t", 1): listed(leader.bodies[0])[("t", 1)] | {"fetch_offset": 151}}
    assert list(listed(two)) == [("t", 0)]
    assert listed(two)[("t", 0)]["fetch_offset"] == 300 and listed(two)[("t", 0)]["last_fetched_epoch"] == 4
    assert list(listed(epoch)) == [("t", 0)] and listed(epoch)[("t", 0)]["current_leader_epoch"] == 5


def test_a_change_no_fetch_answer_marks_is_listed_once_rebuild_s_passes():
    f, leader = fetcher(3), RecordingLeader()
    clock = trio.testing.MockClock()

    async def main():
        await f._fetch(leader)
        f.partitions[("t", 2)].partition.log.log_start_offset = 40  # retention on the follower
        clock.jump(REBUILD_S / 2)
        await f._fetch(leader)
        clock.jump(REBUILD_S / 2)
        await f._fetch(leader)

    trio.run(main, clock=clock)
    _, before, after = leader.bodies
    assert listed(before) == {}
    assert list(listed(after)) == [("t", 2)] and listed(after)[("t", 2)]["log_start_offset"] == 40


def test_a_new_replica_fetch_max_bytes_relists_every_partition():
    f, leader = fetcher(2), RecordingLeader()

    async def main():
        await f._fetch(leader)
        f.config["replica.fetch.max.bytes"] = 4096  # a dynamic broker config change
        await f._fetch(leader)

    trio.run(main)
    assert {tp: p["partition_max_bytes"] for tp, p in listed(leader.bodies[1]).items()} == {
        ("t", 0): 4096,
        ("t", 1): 4096,
    }
