"""Incremental fetch sessions (KIP-227): the leader's cache (broker/fetch_sessions.py) and our
client's handler (client/fetch_session.py), on real decoded Fetch v12 bodies; then the two driven
together, and kafka-python's own session handler against a real broker."""

import pytest
import trio
from broker_helpers import session_fetch as fetch_body
from hypothesis import given, settings
from hypothesis import strategies as st
from replication_helpers import create_topic, partition_state, wait_for

from broker.fetch_sessions import FetchSessionCache, SessionError
from broker.read_results import FetchPartitionData
from client.fetch_session import FetchSessionHandler
from protocol.api import decode_request, encode_request
from protocol.errors import ErrorCode


def entry(index, hw, records=b"", error=0):
    return FetchPartitionData(index, error, high_watermark=hw, log_start_offset=0, records=records)


def read_set(context):
    return {(t.topic, p.partition): p.fetch_offset for t in context.topics for p in t.partitions}


def test_sessionless_fetches_answer_every_partition():
    cache = FetchSessionCache()
    ctx = cache.context(fetch_body(parts=[("a", 0, 5), ("a", 1, 7)]))
    assert ctx.session_id == 0 and read_set(ctx) == {("a", 0): 5, ("a", 1): 7}
    assert ctx.include("a", entry(0, 5)) and len(cache) == 0


def test_a_session_answers_only_partitions_with_news():
    cache = FetchSessionCache()
    full = cache.context(fetch_body(0, 0, [("a", 0, 5), ("a", 1, 7), ("b", 0, 0)]))
    sid = full.session_id
    assert sid > 0 and all(full.include(t, entry(i, 10)) for t, i in [("a", 0), ("a", 1), ("b", 0)])
    # Epoch 1: only a-0 moved; the leader still reads the whole session.
    inc = cache.context(fetch_body(sid, 1, [("a", 0, 8)]))
    assert read_set(inc) == {("a", 0): 8, ("a", 1): 7, ("b", 0): 0}
    assert not inc.include("a", entry(1, 10))  # nothing new
    assert inc.include("a", entry(0, 10, records=b"batch"))  # records
    assert inc.include("b", entry(0, 11))  # the high watermark moved
    assert inc.include("a", entry(1, 10, error=ErrorCode.NOT_LEADER_OR_FOLLOWER))
    assert not inc.include("b", entry(0, 11))  # 11 was sent already
    # Epoch 2 forgets b-0 and adds c-3.
    inc2 = cache.context(fetch_body(sid, 2, [("c", 3, 1)], forgotten=[("b", 0)]))
    assert read_set(inc2) == {("a", 0): 8, ("a", 1): 7, ("c", 3): 1}
    assert inc2.include("c", entry(3, 10))  # new partitions are always answered once


def test_session_errors_and_closing():
    cache = FetchSessionCache()
    sid = cache.context(fetch_body(0, 0, [("a", 0, 0)])).session_id
    for body, code in [
        (fetch_body(sid, 5), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (fetch_body(sid + 100, 1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
    ]:
        with pytest.raises(SessionError) as err:
            cache.context(body)
        assert err.value.error_code == code
    assert cache.context(fetch_body(sid, 1)).session_id == sid  # the failed ones did not advance it
    closing = cache.context(fetch_body(sid, -1, [("a", 0, 3)]))  # FINAL_EPOCH: closed, served without a session
    assert closing.session_id == 0 and read_set(closing) == {("a", 0): 3}
    with pytest.raises(SessionError):
        cache.context(fetch_body(sid, 2))


def test_full_cache_evicts_the_least_recently_used_session():
    cache = FetchSessionCache(max_slots=2)
    first = cache.context(fetch_body(0, 0, [("a", 0, 0)])).session_id
    second = cache.context(fetch_body(0, 0, [("a", 0, 0)])).session_id
    cache.context(fetch_body(first, 1))  # first is now the most recent
    cache.context(fetch_body(0, 0, [("a", 0, 0)]))
    assert len(cache) == 2
    with pytest.raises(SessionError):
        cache.context(fetch_body(second, 1))
    assert FetchSessionCache(max_slots=0).context(fetch_body(0, 0, [("a", 0, 0)])).session_id == 0


def test_client_handler_sends_full_then_only_changes():
    handler = FetchSessionHandler()
    want = {("a", 0): {"partition": 0, "fetch_offset": 5}, ("a", 1): {"partition": 1, "fetch_offset": 7}}
    first = handler.build(want)
    assert (first["session_id"], first["session_epoch"]) == (0, 0) and len(first["topics"][0]["partitions"]) == 2
    assert handler.handle_response(0, 42)
    second = handler.build({("a", 0): {"partition": 0, "fetch_offset": 9}})
    assert (second["session_id"], second["session_epoch"]) == (42, 1)
    assert second["topics"] == [{"topic": "a", "partitions": [{"partition": 0, "fetch_offset": 9}]}]
    assert second["forgotten_topics_data"] == [{"topic": "a", "partitions": [1]}]
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
    assert handler.build(want)["session_epoch"] == 0  # after an error: full again


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.dictionaries(st.tuples(st.sampled_from("abc"), st.integers(0, 3)), st.integers(0, 50), max_size=8),
        min_size=1,
        max_size=12,
    )
)
def test_the_leader_reads_exactly_what_the_client_wants_every_round(rounds):
    cache, handler = FetchSessionCache(), FetchSessionHandler()
    for wanted_offsets in rounds:
        wanted = {
            tp: {"partition": tp[1], "fetch_offset": off, "partition_max_bytes": 1000}
            for tp, off in wanted_offsets.items()
        }
        fields = handler.build(wanted)
        body = decode_request(
            encode_request(
                1,
                12,
                1,
                {"replica_id": 2, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 100, **fields},
                size_prefix=False,
            )
        ).body
        context = cache.context(body)
        assert read_set(context) == wanted_offsets
        handler.handle_response(0, context.session_id)


def _kafka_python_rounds(bootstrap, topic, rounds, per_round):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(topic, p) for p in range(4)])
    consumer.seek_to_beginning()
    seen = []
    for r in range(rounds):
        for i in range(per_round):
            producer.send(topic, value=f"{r}-{i}".encode(), partition=i % 4)
        producer.flush()
        got = []
        for _ in range(100):
            for records in consumer.poll(timeout_ms=200).values():
                got += [rec.value.decode() for rec in records]
            if len(got) >= per_round:
                break
        seen.append(sorted(got))
    consumer.close()
    producer.close()
    return seen


async def test_kafka_python_incremental_fetch_sessions_see_every_record_once(start_broker, zk):
    broker = start_broker(1)
    await create_topic({1: broker}, zk, "fs", partitions=4, rf=1)
    await wait_for(lambda: all(partition_state(zk, "fs", p)["leader"] == 1 for p in range(4)))
    seen = await trio.to_thread.run_sync(_kafka_python_rounds, broker.bootstrap, "fs", 5, 6)
    assert seen == [sorted(f"{r}-{i}" for i in range(6)) for r in range(5)]
