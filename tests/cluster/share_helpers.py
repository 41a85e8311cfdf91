"""What the share group tests (KIP-932, confluent-kafka's `ShareConsumer` as the judge) share:
a broker configuration (Kafka's 30 s record lock, a short delivery limit), topics, producers,
consumers, polling helpers and the `minikafka share-groups` CLI.

The lock is Kafka's default on purpose: on a loaded 2-core machine a test can go 2 s without
polling (a CLI subprocess, a screenshot), and a lock that runs out then redelivers records the
test thinks are done. Tests of a lock running out ask for `SHORT_LOCK_MS` themselves."""

import subprocess
import sys
import time
import uuid

import trio
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from client import Cluster, KafkaError
from client.connection import Connection
from client.share_groups import describe_share_group, share_group_offsets
from protocol.api_keys import ApiKey

SHORT_LOCK_MS = 2000
BROKER = {
    "offsets_topic_replication_factor": 1,
    "offsets_topic_num_partitions": 3,
    "share_coordinator_state_topic_replication_factor": 1,
    "share_coordinator_state_topic_min_isr": 1,
    "share_coordinator_state_topic_num_partitions": 3,
    "group_initial_rebalance_delay_ms": 0,
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.delivery.count.limit": 3,
}


def topic(broker, partitions=3) -> str:
    name = f"jobs-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held until the future is done
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def consumer(broker, group, name, **config) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **config})
    c.subscribe([name])
    return c


def produce(broker, name, count, partitions=3) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(name, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def joined(*consumers, bootstrap: str, group: str, topic: str | None = None, seconds: float = 30.0) -> None:
    """Poll until the group, as ShareGroupDescribe and DescribeShareGroupOffsets show it, has
    every consumer as a member holding an assignment, every member at the group's assignment
    epoch (its heartbeat has been answered with the current target assignment: until then a
    member that joined first still fetches every partition it was given alone, since a
    ShareFetch is not checked against the assignment, in Kafka as here), and every assigned
    partition read once (share.auto.offset.reset is latest: records produced before a partition
    is first read are not delivered, as in Kafka); with `topic`, only that topic's partitions
    are assigned (a member that subscribed anew has heartbeated its new subscription). Waits as
    a client would, with a bound: AssertionError names what the group still lacks after `seconds`."""
    deadline = time.monotonic() + seconds
    seen = None
    while time.monotonic() < deadline:
        for c in consumers:
            assert not [m for m in c.poll(0.2) if m.error() is None]
        seen = trio.run(_group_state, bootstrap, group)
        members, initialized, current = seen
        settled = len(members) == len(consumers) and all(members) and current and all(initialized.values())
        if settled and (topic is None or {t for t, _ in initialized} == {topic}):
            return
    raise AssertionError(f"share group {group} not settled after {seconds} s: {seen}")


async def _group_state(bootstrap: str, group: str):
    """([assignment of each member], {(topic, partition): read once}, every member at the
    assignment epoch) or ([], {}, False) while the group's coordinator is not ready."""
    try:
        async with Cluster.open(bootstrap) as cluster:
            described = await describe_share_group(cluster, group)
            members = [m["assignment"] for m in described["members"]]
            offsets = await share_group_offsets(cluster, group) if any(members) else {}
    except KafkaError:
        return [], {}, False
    assigned = {tp for a in members for tp in a}
    current = all(m["member_epoch"] == described["assignment_epoch"] for m in described["members"])
    return members, {tp: offsets.get(tp, (-1,))[0] >= 0 for tp in assigned}, current


def drain(consumers, want: int, seconds: float = 60.0, on_message=None) -> dict:
    """Poll round-robin until `want` records arrived (or the time is up): value -> consumers."""
    got: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(got) < want:
        for i, c in enumerate(consumers):
            for m in c.poll(0.3):
                assert m.error() is None, m.error()
                got.setdefault(m.value(), []).append(i)
                if on_message is not None:
                    on_message(c, m)
    return got


def share_groups_cli(broker, *args: str) -> list[list[str]]:
    """`minikafka share-groups --bootstrap-server ... *args`: its table's rows, split."""
    command = [sys.executable, "-m", "minikafka_cli.main", "share-groups", "--bootstrap-server", broker.bootstrap]
    done = subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [line.split() for line in done.stdout.splitlines()]


def set_group_configs(broker, group, **configs) -> dict:
    """IncrementalAlterConfigs SET on the GROUP resource, then DescribeConfigs: name -> value."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    return {name: entry.value for name, entry in next(iter(described.values())).result(30).items()}


async def share_offsets(broker, group: str, topics):
    """DescribeShareGroupOffsets v0 for one group: topic -> partition -> (SPSO, error), or the
    group's error."""
    async with Connection.open(broker.host, broker.port) as conn:
        r = await conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, {"groups": [{"group_id": group, "topics": topics}]})
    found = r.groups[0]
    if found.error_code:
        return found.error_code
    return {
        t.topic_name: {p.partition_index: (p.start_offset, p.error_code) for p in t.partitions} for t in found.topics
    }


async def share_lags(brokers, group: str):
    """DescribeShareGroupOffsets v1 at whichever broker coordinates `group`: topic -> partition
    -> (SPSO, lag)."""
    for b in brokers:
        async with Connection.open(b.host, b.port) as conn:
            body = {"groups": [{"group_id": group, "topics": None}]}
            r = await conn.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, body, version=1)
        found = r.groups[0]
        if found.error_code == 0:
            return {
                t.topic_name: {p.partition_index: (p.start_offset, p.lag) for p in t.partitions} for t in found.topics
            }
    return None
