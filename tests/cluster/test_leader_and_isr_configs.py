"""LeaderAndIsr creates a partition's log with its topic's overrides as ZooKeeper holds them now
(Kafka's `fetchLogConfig` on log creation), even when this broker still holds overrides of a
deleted topic of the same name, which a config change racing the deletion can leave behind. An
in-process replica manager over real logs, a real ZooKeeper (chroot per test)."""

from broker_helpers import leader_and_isr, replica_manager

from broker.context import BrokerContext
from broker.handlers import HANDLERS
from protocol.api import Request
from protocol.api_keys import ApiKey
from protocol.types import FieldDict
from zk import znodes
from zk.client import ZkClient


async def serve_leader_and_isr(ctx, partitions):
    header = FieldDict(request_api_key=ApiKey.LEADER_AND_ISR, request_api_version=7, correlation_id=1, client_id="t")
    return await HANDLERS[ApiKey.LEADER_AND_ISR](ctx, Request(header, leader_and_isr(partitions)))


async def test_a_new_log_takes_the_topics_current_overrides(tmp_path, zk_connect, zk):
    zk.create(znodes.CONTROLLER, znodes.encode_controller(9))  # the requests' controller and epoch
    zk.create(znodes.CONTROLLER_EPOCH, b"1")
    zk.create(f"{znodes.CONFIG_TOPICS}/again", znodes.encode_topic_config({}), makepath=True)
    zk.create(f"{znodes.CONFIG_TOPICS}/kept", znodes.encode_topic_config({"max.message.bytes": "300"}))
    client = ZkClient(zk_connect, session_timeout_ms=6000, connection_timeout_ms=10000)
    await client.start()
    try:
        with replica_manager(tmp_path, min_insync_replicas=1) as rm:
            ctx = BrokerContext(rm.config, "c", rm.metadata_cache, rm, rm.topic_configs, zk=client)
            default = rm.topic_configs.defaults.max_message_bytes
            rm.topic_configs.set("again", {"max.message.bytes": "200"})  # left from the deleted "again"
            response = await serve_leader_and_isr(ctx, {("again", 0): (1, [1], [1]), ("kept", 0): (1, [1], [1])})
            assert response["error_code"] == 0
            assert rm.log_manager.get_log(("again", 0)).config.max_message_bytes == default
            assert rm.log_manager.get_log(("kept", 0)).config.max_message_bytes == 300

            # A partition added to a topic with logs here: its log and theirs run with the same overrides.
            zk.set(f"{znodes.CONFIG_TOPICS}/kept", znodes.encode_topic_config({"max.message.bytes": "400"}))
            await serve_leader_and_isr(ctx, {("kept", 1): (1, [1], [1])})
            assert [rm.log_manager.get_log(("kept", p)).config.max_message_bytes for p in (0, 1)] == [400, 400]
    finally:
        await client.close()
