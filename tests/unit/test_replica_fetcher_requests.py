"""What a replica fetcher (broker/replica_fetcher.py) asks its leader for, in an incremental fetch
session (KIP-227): an idle partition's fields are built once and reused (the session finds them
unchanged by identity), and a partition whose log moved is listed again with its new fields."""

from types import SimpleNamespace

import trio

from broker.replica_fetcher import FetchState, ReplicaFetcher
from protocol.errors import ErrorCode

CONFIG = {
    "replica.fetch.backoff.ms": 1000,
    "replica.fetch.max.bytes": 1 << 20,
    "replica.fetch.wait.max.ms": 500,
    "replica.fetch.min.bytes": 1,
    "replica.fetch.response.max.bytes": 10 << 20,
}


class RecordingLeader:
    """Answers every Fetch with no partitions (nothing new) in session 7; keeps the bodies."""

    def __init__(self):
        self.bodies = []

    def version_for(self, api_key):
        return 12

    async def request(self, api_key, body, timeout_s):
        self.bodies.append(body)
        return SimpleNamespace(error_code=ErrorCode.NONE, session_id=7, responses=[])


def fetcher(partitions: int):
    f = ReplicaFetcher(2, 1, "127.0.0.1", 9092, dict(CONFIG), lambda tp: None, lambda log_dir: None)
    for i in range(partitions):
        log = SimpleNamespace(log_end_offset=100 + i, log_start_offset=0, epoch_cache=SimpleNamespace(latest_epoch=3))
        f.partitions[("t", i)] = FetchState(SimpleNamespace(tp=("t", i), leader_epoch=3, log=log), 3, truncated=True)
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
        f.partitions[("t", 1)].partition.log.log_end_offset = 500  # an append
        await f._fetch(leader)
        f.partitions[("t", 2)].partition.log.log_start_offset = 40  # retention or the leader's DeleteRecords
        f.partitions[("t", 0)].partition.log.epoch_cache.latest_epoch = 4  # a new leader epoch in the log
        await f._fetch(leader)
        f.partitions[("t", 0)].leader_epoch = 5  # LeaderAndIsr
        await f._fetch(leader)

    trio.run(main)
    _, moved, two, epoch = leader.bodies
    assert listed(moved) == {("t", 1): listed(leader.bodies[0])[("t", 1)] | {"fetch_offset": 500}}
    assert sorted(listed(two)) == [("t", 0), ("t", 2)]
    assert listed(two)[("t", 2)]["log_start_offset"] == 40 and listed(two)[("t", 0)]["last_fetched_epoch"] == 4
    assert list(listed(epoch)) == [("t", 0)] and listed(epoch)[("t", 0)]["current_leader_epoch"] == 5


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
