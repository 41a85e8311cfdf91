"""Pipelined requests on one connection (broker/server.py): a Produce waiting for the high
watermark lets the next request start once its appends are done, answers stay in request order,
and append order is request order."""

import signal

import trio
from replication_helpers import create_topic, log_bytes, partition_state, produce, wait_for_isr

from protocol import record_batch as rb
from protocol.api import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder


def produce_frame(correlation_id: int, acks: int, value: bytes) -> bytes:
    body = {
        "acks": acks,
        "timeout_ms": 2500,
        "topic_data": [{"name": "q", "partition_data": [{"index": 0, "records": rb.build_batch([(None, value)])}]}],
    }
    return encode_request(0, 7, correlation_id, body)


async def test_pipelined_produces_append_in_order_while_earlier_ones_wait_and_answer_in_order(start_broker, zk):
    # The ISR keeps the paused follower (lag limit 60 s), so acks=-1 waits for the full timeout.
    brokers = {i: start_broker(i, replica_lag_time_max_ms="60000") for i in (1, 2)}
    await create_topic(brokers, zk, "q", partitions=1, rf=2)
    await wait_for_isr(zk, "q", [1, 2])
    leader = brokers[partition_state(zk, "q", 0)["leader"]]
    follower = next(b for b in brokers.values() if b is not leader)
    # The znode names the leader a moment before the leader has heard LeaderAndIsr: one acks=-1
    # record, retried through that window, shows both replicas serving.
    assert (await produce(leader, "q", b"warm-up", -1)).error_code == ErrorCode.NONE
    follower.process.send_signal(signal.SIGSTOP)
    try:
        stream = await trio.open_tcp_stream(leader.host, leader.port)
        async with stream:
            frames = [
                produce_frame(1, -1, b"first"),
                produce_frame(2, -1, b"second"),
                encode_request(3, 9, 3, {"topics": [{"name": "q"}]}),
                produce_frame(4, 1, b"third"),
            ]
            await stream.send_all(b"".join(frames))
            # All three batches are appended long before the first acks=-1 request times out.
            with trio.fail_after(1.5):
                while len(list(rb.iter_batches(log_bytes(leader, "q", 0)))) < 4:
                    await trio.sleep(0.02)
            values = [
                rb.decode_records(log_bytes(leader, "q", 0), pos, h)[0].value
                for pos, h in rb.iter_batches(log_bytes(leader, "q", 0))
            ]
            assert values == [b"warm-up", b"first", b"second", b"third"]
            decoder, frames_in = FrameDecoder(), []
            with trio.fail_after(10):
                while len(frames_in) < 4:
                    frames_in += decoder.feed(await stream.receive_some(65536))
        versions = [(0, 7), (0, 7), (3, 9), (0, 7)]
        answers = [decode_response(key, v, f) for (key, v), f in zip(versions, frames_in)]
        assert [cid for cid, _ in answers] == [1, 2, 3, 4]
        codes = [answers[i][1].responses[0].partition_responses[0].error_code for i in (0, 1, 3)]
        assert codes == [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NONE]
        assert answers[3][1].responses[0].partition_responses[0].base_offset == 3
    finally:
        follower.process.send_signal(signal.SIGCONT)


def fetch_frame(correlation_id: int) -> bytes:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}  # fmt: skip
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": "q", "partitions": [partition]}],
            "forgotten_topics_data": [], "rack_id": ""}  # fmt: skip
    return encode_request(1, 11, correlation_id, body)


async def test_a_request_after_a_produce_on_its_connection_sees_the_produce_appended(start_broker, zk):
    # Produce appends are made at the end of the loop turn (broker/client_appends.py); the next
    # request of the connection (here an inline Fetch, read in the same segment) starts after them,
    # as Kafka's muted connection orders them: an acks=0 batch is there for the Fetch behind it.
    brokers = {1: start_broker(1)}
    await create_topic(brokers, zk, "q", partitions=1, rf=1)
    assert (await produce(brokers[1], "q", b"warm-up", 1)).error_code == ErrorCode.NONE
    stream = await trio.open_tcp_stream(brokers[1].host, brokers[1].port)
    async with stream:
        await stream.send_all(produce_frame(1, 0, b"unacknowledged") + fetch_frame(2))
        decoder, frames_in = FrameDecoder(), []
        with trio.fail_after(10):
            while not frames_in:  # acks=0 has no answer: the one frame is the Fetch's
                frames_in += decoder.feed(await stream.receive_some(65536))
    _, fetched = decode_response(1, 11, frames_in[0])
    records = fetched.responses[0].partitions[0].records
    values = [rb.decode_records(records, pos, h)[0].value for pos, h in rb.iter_batches(records)]
    assert values == [b"warm-up", b"unacknowledged"]
