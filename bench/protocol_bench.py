"""Protocol benchmarks: decode/encode rates of the messages on the broker's hot path.

Run with `make bench`. Each case runs for about `--seconds`; results print as a table with a ratio
to the case's ceiling. For decoding a Produce request carrying one 1 MiB batch the ceiling is a
plain `memoryview` slice of the same frame (what "decode without copying the records" can at best
cost); a full copy of the frame is shown beside it for scale.
"""

from __future__ import annotations

import argparse
import os
import time

from protocol import record_batch as rb
from protocol.api import decode_request, encode_request, encode_response
from protocol.framing import FrameDecoder, encode_frame
from protocol.record_validation import validate_client_batch, validate_records_reference


def rate(fn, seconds: float) -> float:
    """Calls per second of fn() over about `seconds`."""
    n, batch, start = 0, 1, time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed
        batch = min(batch * 2, 100000)


def produce_frame(batch: bytes, version: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "bench", "partition_data": [{"index": 0, "records": batch}]}],
    }
    (payload,) = FrameDecoder().feed(encode_request(0, version, 1, body, client_id="bench"))
    return payload


def fetch_response_body(batch: bytes) -> dict:
    return {
        "responses": [
            {
                "topic": "bench",
                "partitions": [
                    {
                        "partition_index": 0,
                        "high_watermark": 100,
                        "last_stable_offset": 100,
                        "log_start_offset": 0,
                        "records": batch,
                    }
                ],
            }
        ]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per case (default 1 s)")
    args = parser.parse_args(argv)
    s = args.seconds

    big = rb.build_batch([(None, os.urandom(1 << 20))], compression=rb.NONE)
    small = rb.build_batch([(None, os.urandom(16 << 10))], compression=rb.NONE)
    rows = []

    for label, batch in (("1 MiB", big), ("16 KiB", small)):
        for version in (7, 9):
            frame = produce_frame(batch, version)
            req = decode_request(frame)
            records = req.body.topic_data[0].partition_data[0].records
            assert isinstance(records, memoryview) and records.obj is frame, "records were copied"
            start = frame.find(batch[:64])
            ceiling = rate(lambda: memoryview(frame)[start : start + len(batch)], s)
            got = rate(lambda: decode_request(frame), s)
            rows.append(
                (
                    f"decode Produce v{version}, one {label} batch",
                    got,
                    got * len(frame) / 1e6,
                    "memoryview slice",
                    ceiling,
                    got / ceiling,
                )
            )
            if label == "1 MiB" and version == 9:
                copy = rate(lambda: bytes(memoryview(frame)), s)
                rows.append(
                    (
                        "  (for scale) copy the 1 MiB frame",
                        copy,
                        copy * len(frame) / 1e6,
                        "memoryview slice",
                        ceiling,
                        copy / ceiling,
                    )
                )

    # a 1 MiB request as a TLS stream delivers it (one 16 KiB record per read): split into its
    # frame, against one copy of the frame (what joining its pieces once costs at best)
    frame = produce_frame(big, 9)
    stream = encode_frame(frame)
    reads = [stream[i : i + (16 << 10)] for i in range(0, len(stream), 16 << 10)]

    def split() -> None:
        decoder = FrameDecoder(max_frame_size=1 << 30)
        for piece in reads:
            decoder.feed(piece)

    got = rate(split, s)
    copy = rate(lambda: bytes(memoryview(frame)), s)
    rows.append(
        ("split a 1 MiB frame fed in 16 KiB reads", got, got * len(frame) / 1e6, "copy of the frame", copy, got / copy)
    )
    for version in (8, 9):
        body = {"responses": [{"name": "bench", "partition_responses": [{"index": 0, "base_offset": 42}]}]}
        got = rate(lambda: encode_response(0, version, 1, body), s)
        rows.append((f"encode Produce v{version} response", got, None, "", None, None))
    for version in (11, 12):
        body = fetch_response_body(big)
        got = rate(lambda: encode_response(1, version, 1, body), s)
        copy = rate(lambda: bytes(memoryview(big)), s)
        rows.append(
            (
                f"encode Fetch v{version} response, one 1 MiB batch",
                got,
                got * len(big) / 1e6,
                "copy of the batch",
                copy,
                got / copy,
            )
        )
    meta = {
        "brokers": [{"node_id": i, "host": "127.0.0.1", "port": 9092 + i} for i in range(3)],
        "topics": [
            {
                "name": f"topic-{t}",
                "partitions": [
                    {"partition_index": p, "leader_id": p % 3, "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2]}
                    for p in range(10)
                ],
            }
            for t in range(10)
        ],
    }
    got = rate(lambda: encode_response(3, 12, 1, meta), s)
    rows.append(("encode Metadata v12 response, 100 partitions", got, None, "", None, None))
    (check_frame,) = [produce_frame(big, 9)]
    header = rb.read_header(big)
    got = rate(lambda: rb.validate_batch(big, 0, header), s)
    rows.append(("CRC-32C check of a 1 MiB batch", got, got * len(big) / 1e6, "", None, None))
    del check_frame
    # Kafka's per-record checks of a client batch (issue 15): compiled vs its Python reference
    # (the target: no more than 25% of a leader's RF-3 acks=all throughput; see the cluster bench)
    for size, count in ((100, 10000), (1024, 1000)):
        for codec in (rb.NONE, rb.LZ4):
            batch = rb.build_batch([(None, b"x" * size)] * count, compression=codec)
            header = rb.read_header(batch)
            payload = memoryview(batch)[rb.HEADER_SIZE :]
            plain = payload if codec == rb.NONE else rb.decompress(codec, payload)
            native = rate(lambda: validate_client_batch(batch, 0, header), s)
            python = rate(lambda: validate_records_reference(plain, count), s)
            rows.append(
                (
                    f"validate {count} x {size} B records, {rb.CODEC_NAMES[codec]}, per record",
                    native * count,
                    None,
                    "Python reference",
                    python * count,
                    native / python,
                )
            )

    print(f"{'case':52} {'ops/s':>12} {'MB/s':>10}   {'ceiling':18} {'ceiling ops/s':>14} {'ratio':>7}")
    print("-" * 120)
    for case, ops, mbs, ceil_name, ceil, ratio in rows:
        print(
            f"{case:52} {ops:12,.0f} {'' if mbs is None else f'{mbs:10,.0f}':>10}   {ceil_name:18} "
            f"{'' if ceil is None else f'{ceil:14,.0f}':>14} {'' if ratio is None else f'{ratio:7.1%}':>7}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
