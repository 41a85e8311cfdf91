"""A share group's offsets changed by an administrator (KIP-932's AlterShareGroupOffsets and
DeleteShareGroupOffsets, and DeleteGroups of a share group), through `minikafka share-groups` and
over the wire, with confluent-kafka's `ShareConsumer` (librdkafka 2.16) showing where the group
then reads."""

import subprocess
import sys
import time
import uuid

import pytest
import trio
from share_helpers import BROKER, consumer, drain, produce, set_group_configs, share_groups_cli, topic

from client.connection import Connection
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # ZooKeeper and a broker


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "minikafka_cli.main", "share-groups", "--bootstrap-server", broker.bootstrap]
    return subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)


def start_offsets(broker, group: str) -> dict[str, str]:
    """partition -> START-OFFSET of `share-groups --describe --offsets`."""
    rows = share_groups_cli(broker, "--describe", "--group", group, "--offsets")
    return {row[2]: row[3] for row in rows[1:]}


def wait_for(check, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.3)


def values(got: dict) -> list[int]:
    return sorted(int(v) for v in got)


def finish(c) -> None:
    """Poll briefly (the next fetch carries the last records' implicit acknowledgements), then
    close (the member leaves the group)."""
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        assert not [m for m in c.poll(0.1) if m.error() is None]
    c.close()


def test_reset_and_delete_offsets_move_where_the_group_reads(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=2)
    produce(broker, name, 10, partitions=2)  # partition 0: 0 2 4 6 8, partition 1: 1 3 5 7 9

    # a group that does not exist yet: the reset creates it (the default, latest, would read nothing)
    plan = share_groups_cli(broker, "--reset-offsets", "--group", "g", "--topic", name, "--to-earliest")
    assert plan[:3] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"],
        ["g", name, "0", "0"],
        ["g", name, "1", "0"],
    ]
    assert plan[3][:2] == ["(dry", "run:"]
    assert cli(broker, "--describe", "--group", "g").returncode == 1  # a dry run changes nothing
    share_groups_cli(broker, "--reset-offsets", "--group", "g", "--topic", name, "--to-earliest", "--execute")
    assert start_offsets(broker, "g") == {"0": "0", "1": "0"}

    member = consumer(broker, "g", name)
    assert values(drain([member], 10, seconds=30)) == list(range(10))
    busy = cli(broker, "--reset-offsets", "--group", "g", "--topic", name, "--to-offset", "3", "--execute")
    assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stderr
    finish(member)
    assert wait_for(lambda: start_offsets(broker, "g") == {"0": "5", "1": "5"})

    # back to offset 3: the leader drops what it held of the group and reads the state anew
    assert wait_for(
        lambda: (
            cli(broker, "--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "3", "--execute").returncode
            == 0
        )
    )
    assert start_offsets(broker, "g") == {"0": "3", "1": "3"}
    again = consumer(broker, "g", name)
    assert values(drain([again], 4, seconds=30)) == [6, 7, 8, 9]
    assert drain([again], 1, seconds=3) == {}
    finish(again)

    # forgetting the topic: the group reads it where share.auto.offset.reset says
    assert wait_for(lambda: cli(broker, "--delete-offsets", "--group", "g", "--topic", name).returncode == 0)
    assert share_groups_cli(broker, "--describe", "--group", "g", "--offsets") == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    ]
    set_group_configs(broker, "g", share_auto_offset_reset="earliest")
    fresh = consumer(broker, "g", name)
    assert values(drain([fresh], 10, seconds=30)) == list(range(10))
    finish(fresh)

    # deleting the group deletes its share state too
    topic_id = trio.run(_topic_id, broker, name)
    assert wait_for(lambda: cli(broker, "--delete", "--group", "g").returncode == 0)
    gone = cli(broker, "--describe", "--group", "g")
    assert gone.returncode == 1 and "GROUP_ID_NOT_FOUND" in gone.stderr
    assert trio.run(_summaries, broker, "g", topic_id, 2) == [(ErrorCode.NONE, -1), (ErrorCode.NONE, -1)]


async def _topic_id(broker, name: str) -> uuid.UUID:
    async with Connection.open(broker.host, broker.port) as conn:
        md = await conn.request(ApiKey.METADATA, {"topics": [{"name": name}]}, version=12)
        return md.topics[0].topic_id


async def _summaries(broker, group: str, topic_id: uuid.UUID, partitions: int) -> list[tuple[int, int]]:
    """ReadShareGroupStateSummary (key 87) of each partition, asked of the share coordinator
    (one broker: this one)."""
    async with Connection.open(broker.host, broker.port) as conn:
        parts = [{"partition": p, "leader_epoch": -1} for p in range(partitions)]
        body = {"group_id": group, "topics": [{"topic_id": topic_id, "partitions": parts}]}
        r = await conn.request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, body, version=1)
        return sorted((p.error_code, p.start_offset) for p in r.results[0].partitions)


async def test_alter_and_delete_share_group_offsets_errors_over_the_wire(start_broker):
    broker = start_broker(1, **BROKER)
    async with Connection.open(broker.host, broker.port) as conn:
        with trio.fail_after(30):
            while True:  # the broker becomes the controller shortly after it starts
                created = await conn.request(
                    ApiKey.CREATE_TOPICS,
                    {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 30000},
                    version=5,
                )
                if created.topics[0].error_code != ErrorCode.NOT_CONTROLLER:
                    break
                await trio.sleep(0.2)
        assert created.topics[0].error_code == ErrorCode.NONE
        alter = {
            "group_id": "admin-made",
            "topics": [
                {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 0}]},
                {"topic_name": "t-missing", "partitions": [{"partition_index": 0, "start_offset": 0}]},
                {"topic_name": "t", "partitions": [{"partition_index": 7, "start_offset": 0}]},
            ],
        }
        with trio.fail_after(30):
            while True:  # FindCoordinator creates __consumer_offsets
                await conn.request(
                    ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["admin-made"]}, version=4
                )
                r = await conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter, version=0)
                if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR):
                    break
                await trio.sleep(0.3)
        assert r.error_code == ErrorCode.NONE, r
        errors = sorted((t.topic_name, p.partition_index, p.error_code) for t in r.responses for p in t.partitions)
        assert errors == [
            ("t", 0, ErrorCode.NONE),
            ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("t-missing", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        negative = dict(alter, topics=[{"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": -5}]}])
        r = await conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, negative, version=0)
        assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST
        listed = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": ["share"]}, version=5)
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("admin-made", "Empty")]

        empty = await conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, {"group_id": "", "topics": []}, version=0)
        assert empty.error_code == ErrorCode.INVALID_GROUP_ID
        unknown = await conn.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, {"group_id": "never-was", "topics": [{"topic_name": "t"}]}, version=0
        )
        assert unknown.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        deleted = await conn.request(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS,
            {"group_id": "admin-made", "topics": [{"topic_name": "t"}, {"topic_name": "t-missing"}]},
            version=0,
        )
        assert [(t.topic_name, t.error_code) for t in deleted.responses] == [
            ("t", ErrorCode.NONE),
            ("t-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        # a classic group's id is not a share group's
        joined = await conn.request(
            ApiKey.OFFSET_COMMIT,
            {
                "group_id": "classic",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
            },
            version=8,
        )
        assert joined.topics[0].partitions[0].error_code == ErrorCode.NONE
        other = await conn.request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, dict(alter, group_id="classic"), version=0)
        assert other.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def consume(broker, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "minikafka_cli.main", "consume", "--bootstrap-server", broker.bootstrap]
    return subprocess.run(command + list(args), capture_output=True, text=True, timeout=90)


def test_consume_share_group_acknowledges_as_it_prints(start_broker):
    broker = start_broker(1, **BROKER)
    name = topic(broker, partitions=1)
    produce(broker, name, 10, partitions=1)
    set_group_configs(broker, "cli", share_auto_offset_reset="earliest")
    first = consume(
        broker,
        "--topic",
        name,
        "--share-group",
        "cli",
        "--max-messages",
        "10",
        "--print-delivery-count",
        "--reject-on",
        "3",
        "--release-on",
        "5",
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"Delivery:1\t{i}" for i in range(10)]
    # 3 was rejected: never again; 5 was released: delivered again (its count up), and accepted now
    second = consume(broker, "--topic", name, "--share-group", "cli", "--timeout-ms", "3000", "--print-delivery-count")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == ["Delivery:2\t5"]
    assert wait_for(lambda: start_offsets(broker, "cli") == {"0": "10"})
    # records handed out but not printed (--max-messages) are released for the next member
    produce(broker, name, 4, partitions=1)  # 0 1 2 3 at offsets 10-13
    part = consume(broker, "--topic", name, "--share-group", "cli", "--max-messages", "1")
    assert part.stdout.splitlines() == ["0"]
    rest = consume(broker, "--topic", name, "--share-group", "cli", "--timeout-ms", "3000", "--print-delivery-count")
    assert sorted(rest.stdout.splitlines()) == ["Delivery:2\t1", "Delivery:2\t2", "Delivery:2\t3"]
    bad = consume(broker, "--topic", name, "--share-group", "cli", "--from-beginning")
    assert bad.returncode == 2 and "--share-group" in bad.stderr


def test_share_state_is_pruned_and_a_restarted_broker_resumes_from_it(start_broker):
    config = BROKER | {
        "share.coordinator.state.topic.prune.interval.ms": 300,
        "share.coordinator.snapshot.update.records.per.snapshot": 2,
    }
    broker = start_broker(1, **config)
    name = topic(broker, partitions=1)
    set_group_configs(broker, "pruned", share_auto_offset_reset="earliest")
    for _ in range(6):  # each run: a new member, its acknowledgements written at the coordinator
        produce(broker, name, 5, partitions=1)
        run = consume(broker, "--topic", name, "--share-group", "pruned", "--max-messages", "5")
        assert run.returncode == 0 and len(run.stdout.splitlines()) == 5, run.stderr
    assert wait_for(lambda: start_offsets(broker, "pruned") == {"0": "30"})
    assert wait_for(lambda: trio.run(_state_log_start, broker) > 0), "__share_group_state was never pruned"
    broker.kill()
    broker.start()
    assert wait_for(lambda: cli(broker, "--describe", "--group", "pruned").returncode == 0, seconds=30)
    assert start_offsets(broker, "pruned") == {"0": "30"}
    produce(broker, name, 2, partitions=1)
    rest = consume(broker, "--topic", name, "--share-group", "pruned", "--timeout-ms", "3000")
    assert rest.stdout.splitlines() == ["0", "1"]  # only the new records: the state survived pruning


async def _state_log_start(broker) -> int:
    """The largest log start offset among `__share_group_state`'s partitions."""
    from client import Cluster
    from client.reads import EARLIEST, list_offset

    async with Cluster.open(broker.bootstrap) as cluster:
        parts = await cluster.partitions("__share_group_state")
        return max([await list_offset(cluster, "__share_group_state", p, EARLIEST) for p in parts])
