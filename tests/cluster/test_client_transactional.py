"""Our client's transactional producer (KIP-98), judged by confluent-kafka's read_committed
consumer: committed transactions are visible, aborted ones are not, offsets sent to a transaction
become the group's only with its commit, and a newer producer with the same transactional id
fences the older one."""

import pytest
import trio
from group_helpers import create_topics
from txn_helpers import TXN_BROKER, consume_all

from client import Cluster, KafkaError
from client.groups import committed_offsets
from client.producer import Producer
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow


async def test_commit_abort_and_offsets_in_the_transaction(start_broker):
    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"ct": 2, "src": 1})
    async with Cluster.open(broker.bootstrap) as cluster:
        async with Producer.open(cluster, transactional_id="ours-1") as producer:
            with pytest.raises(RuntimeError, match="begin_transaction"):
                await producer.send("ct", b"outside", partition=0)
            for round_ in range(3):
                producer.begin_transaction()
                for i in range(6):
                    await producer.send("ct", b"%d-%d" % (round_, i), partition=i % 2)
                await producer.send_offsets_to_transaction({("src", 0): 10 * (round_ + 1)}, "g-ours")
                if round_ == 1:
                    assert await committed_offsets(cluster, "g-ours") == {("src", 0): 10}
                    await producer.abort_transaction()
                else:
                    await producer.commit_transaction()
        # the commit's markers are written after EndTxn returns: a stable read waits for them (KIP-447)
        assert await committed_offsets(cluster, "g-ours", require_stable=True) == {("src", 0): 30}
    committed = await trio.to_thread.run_sync(lambda: consume_all(broker.bootstrap, "ct", "read_committed", 12))
    everything = await trio.to_thread.run_sync(lambda: consume_all(broker.bootstrap, "ct", "read_uncommitted", 18))
    assert sorted(v for _, v in committed) == sorted(b"%d-%d" % (r, i) for r in (0, 2) for i in range(6))
    assert len(everything) == 18


async def test_a_newer_producer_fences_the_older_and_aborts_its_open_transaction(start_broker):
    broker = start_broker(1, **TXN_BROKER)
    await trio.to_thread.run_sync(create_topics, broker.bootstrap, {"fz": 1})
    async with Cluster.open(broker.bootstrap) as cluster:
        async with Producer.open(cluster, transactional_id="same") as old:
            old.begin_transaction()
            await old.send("fz", b"zombie", partition=0)
            await old.flush()
            async with Producer.open(cluster, transactional_id="same") as new:  # aborts the zombie's
                new.begin_transaction()
                await new.send("fz", b"fresh", partition=0)
                await new.commit_transaction()
                with pytest.raises(KafkaError) as fenced:
                    await old.commit_transaction()
                assert fenced.value.error_code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
    committed = await trio.to_thread.run_sync(lambda: consume_all(broker.bootstrap, "fz", "read_committed", 1))
    assert [v for _, v in committed] == [b"fresh"]
