"""`max.poll.interval.ms` with confluent-kafka's `ShareConsumer` (librdkafka 2.16): a member
that stops polling for longer leaves the share group (ShareGroupHeartbeat with member epoch -1),
its next poll reports `_MAX_POLL_EXCEEDED`, and it then joins again and reads on; the records it
held are acknowledged by that poll (implicit mode), so none is lost or delivered twice."""

import time

import pytest
import trio
from confluent_kafka import KafkaError, KafkaException
from share_helpers import BROKER, consumer, drain, produce, set_group_configs, share_offsets, topic

from client.connection import Connection
from protocol.api_keys import ApiKey

pytestmark = pytest.mark.slow  # ZooKeeper and a broker
HEARTBEAT = {"group.share.heartbeat.interval.ms": 1000, "group.share.min.heartbeat.interval.ms": 1000}


async def members(broker, group: str) -> int:
    async with Connection.open(broker.host, broker.port) as conn:
        body = {"group_ids": [group], "include_authorized_operations": False}
        r = await conn.request(ApiKey.SHARE_GROUP_DESCRIBE, body)
    return len(r.groups[0].members)


def wait_for(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def test_a_member_that_stops_polling_leaves_and_comes_back(start_broker):
    broker = start_broker(1, **(BROKER | HEARTBEAT))
    name = topic(broker, partitions=1)
    set_group_configs(broker, "slow", share_auto_offset_reset="earliest")
    produce(broker, name, 5, partitions=1)
    c = consumer(broker, "slow", name, **{"max.poll.interval.ms": 3000})
    assert len(drain([c], 5, seconds=20)) == 5
    assert trio.run(members, broker, "slow") == 1
    # not polling for longer than max.poll.interval.ms: the member leaves the group
    assert wait_for(lambda: trio.run(members, broker, "slow") == 0, seconds=10)
    with pytest.raises(KafkaException) as exceeded:
        c.poll(0.5)
    assert exceeded.value.args[0].code() == KafkaError._MAX_POLL_EXCEEDED
    later: list[tuple[int, int]] = []
    produce(broker, name, 2, partitions=1)  # offsets 5 and 6
    deadline = time.monotonic() + 15
    while len(later) < 2 and time.monotonic() < deadline:
        later += [(m.offset(), m.delivery_count()) for m in c.poll(0.5) if m.error() is None]
    assert later == [(5, 1), (6, 1)]  # a member again; 0-4 were not handed out again
    assert trio.run(members, broker, "slow") == 1
    c.poll(0.5)  # carries the acknowledgements of 5 and 6
    assert wait_for(lambda: trio.run(share_offsets, broker, "slow", None) == {name: {0: (7, 0)}}, seconds=10)
    c.close()
