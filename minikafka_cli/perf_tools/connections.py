"""Many producer connections, each sending small Produce requests at a steady pace (issue 22's
"100 connections each sending 100 requests/s").

Every connection is a plain TCP socket to the partition's leader carrying Produce v9 requests
(acks as given, one 1-record batch of `record_size` bytes each), paced at `rate` requests/s per
connection with a random phase so the connections do not send in lock-step, or (`--rate 0`) closed
loop: each connection keeps `--in-flight` requests outstanding and sends the next as an answer
arrives, which measures what the broker sustains. The request bytes are
encoded once and only the correlation id changes, so this driver costs little CPU per request and
the broker, not the driver, is what is measured. Latency is send to response, per request.

Run as `python -m minikafka_cli.perf_tools.connections --bootstrap-server H:P --topic T --connections 100 --rate 100
--seconds 10`; prints one JSON `Result` (records = requests answered without error; `errors`
counts error codes and unanswered requests).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time

import trio

from client import Cluster
from minikafka_cli.perf_tools.stats import Latency, Result, process_cpu_s
from protocol import record_batch as rb
from protocol.api import encode_request
from protocol.api_keys import ApiKey
from protocol.framing import FrameDecoder

_PRODUCE_VERSION = 9
_CORRELATION = struct.Struct(">i")
_ERROR = struct.Struct(">h")


def error_code_position(topic: str) -> int:
    """Where a Produce v9 response to `produce_frame` holds its one partition's error code: after
    the correlation id, the header's tags, the topic count, the topic name and the partition count
    (compact, one byte each while under 127) and the partition index. Read there rather than
    decoding the response, so the driver stays cheap."""
    return 4 + 1 + 1 + 1 + len(topic.encode()) + 1 + 4


def produce_frame(topic: str, partition: int, record_size: int, acks: int) -> bytearray:
    """A size-prefixed Produce v9 request of one 1-record batch; bytes 8-11 hold the correlation id."""
    batch = rb.build_batch([(None, b"x" * record_size)])
    body = {
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    return bytearray(encode_request(ApiKey.PRODUCE, _PRODUCE_VERSION, 0, body, "minikafka-perf-connections"))


async def _leader(bootstrap: str, topic: str, partition: int) -> tuple[str, int]:
    async with Cluster.open(bootstrap) as cluster:
        md = await cluster.refresh_metadata([topic])
        leader = md.topics[topic][partition].leader
        return md.brokers[leader]


async def _one_connection(
    host: str,
    port: int,
    topic: str,
    frame: bytearray,
    rate: float,
    deadline: float,
    base: int,
    latencies: list,
    counts: dict,
    in_flight: int = 1,
) -> None:
    stream = await trio.open_tcp_stream(host, port)
    window = trio.Semaphore(in_flight)  # closed loop (rate 0): requests outstanding at most
    at = error_code_position(topic)
    sent_at: dict[int, float] = {}
    async with stream, trio.open_nursery() as nursery:

        async def receive() -> None:
            # until cancelled once every request sent was answered (below): a loop that also
            # stopped at the deadline with nothing outstanding raced the sender's last request
            decoder = FrameDecoder()
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    return
                for payload in decoder.feed(data):
                    correlation_id, code = _CORRELATION.unpack_from(payload)[0], _ERROR.unpack_from(payload, at)[0]
                    started = sent_at.pop(correlation_id)
                    latencies.append((time.perf_counter() - started) * 1000)
                    counts["ok" if code == 0 else "errors"] += 1
                    if rate <= 0:
                        window.release()

        nursery.start_soon(receive)
        correlation_id = base
        if rate > 0:
            await trio.sleep(random.random() / rate)
        period = 1 / rate if rate > 0 else 0.0
        next_send = trio.current_time()
        while next_send < deadline:
            if rate <= 0:
                await window.acquire()
            _CORRELATION.pack_into(frame, 8, correlation_id)
            sent_at[correlation_id] = time.perf_counter()
            await stream.send_all(frame)
            correlation_id += 1
            if rate > 0:
                next_send += period
                await trio.sleep_until(next_send)
            else:
                next_send = trio.current_time()
        with trio.move_on_after(30):
            while sent_at:
                await trio.sleep(0.01)
        counts["errors"] += len(sent_at)
        nursery.cancel_scope.cancel()


async def run_connections(
    bootstrap: str,
    topic: str,
    connections: int,
    rate: float,
    seconds: float,
    record_size: int = 100,
    acks: int = -1,
    in_flight: int = 1,
) -> Result:
    """`connections` connections to the leader of `topic`-0 for `seconds`: each paced at `rate`
    requests/s, or with `rate` 0 closed-loop, keeping `in_flight` requests outstanding (a new one
    as each answer arrives, as a producer with max.in.flight.requests.per.connection does)."""
    host, port = await _leader(bootstrap, topic, 0)
    latencies: list[float] = []
    counts = {"ok": 0, "errors": 0}
    cpu0, start = process_cpu_s(), time.perf_counter()
    deadline = trio.current_time() + seconds
    async with trio.open_nursery() as nursery:
        for i in range(connections):
            frame = produce_frame(topic, 0, record_size, acks)
            nursery.start_soon(
                _one_connection, host, port, topic, frame, rate, deadline, i << 20, latencies, counts, in_flight
            )
    elapsed = time.perf_counter() - start
    return Result(
        "produce",
        "connections",
        counts["ok"],
        counts["ok"] * record_size,
        elapsed,
        Latency.of(latencies),
        counts["errors"],
        {"client_cpu_s": process_cpu_s() - cpu0, "connections": connections, "rate_per_connection": rate},
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True, help="its partition 0 is written")
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100, help="requests/s per connection (0: closed loop)")
    parser.add_argument("--in-flight", type=int, default=1, help="closed loop: requests outstanding per connection")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--acks", type=int, choices=(-1, 1), default=-1)
    args = parser.parse_args(argv)
    result = trio.run(
        run_connections,
        args.bootstrap_server,
        args.topic,
        args.connections,
        args.rate,
        args.seconds,
        args.record_size,
        args.acks,
        args.in_flight,
    )
    print(result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
