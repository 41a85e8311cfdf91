"""A capture responder for judging the protocol with real clients (test harness, not the broker).

It accepts connections on 127.0.0.1, records every request frame, and answers just enough for a
producer to deliver one batch: ApiVersions (with the v0 UNSUPPORTED_VERSION fallback), Metadata
(itself as the only broker, leader of every partition asked for), InitProducerId, Produce, and
GetTelemetrySubscriptions (KIP-714: no metrics wanted).
Every answer is encoded by `protocol.api`, so real clients also judge our response encoders.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from dataclasses import dataclass, field

import trio

from protocol.api import decode_request, encode_response, peek_header, served_api_versions
from protocol.errors import UnsupportedVersion
from protocol.framing import FrameDecoder

API_VERSIONS, METADATA, PRODUCE, INIT_PRODUCER_ID = 18, 3, 0, 22
GET_TELEMETRY_SUBSCRIPTIONS = 71  # librdkafka asks (KIP-714); told no metrics are wanted
TOPIC_ID = uuid.UUID(int=7)


@dataclass
class Capture:
    port: int = 0
    first_frames: list[bytes] = field(default_factory=list)  # first frame of each connection
    requests: list = field(default_factory=list)  # decoded requests, in arrival order
    topics: tuple[str, ...] = ("t",)

    def produce_batches(self) -> list[memoryview]:
        return [
            p.records
            for r in self.requests
            if r.api_key == PRODUCE
            for t in r.body.topic_data
            for p in t.partition_data
        ]

    def answer(self, frame: bytes) -> bytes:
        try:
            req = decode_request(frame)
        except UnsupportedVersion as e:
            if e.api_key != API_VERSIONS:
                raise
            return encode_response(
                API_VERSIONS, 0, e.correlation_id, {"error_code": 35, "api_keys": served_api_versions()}
            )
        self.requests.append(req)
        key, v, corr = req.api_key, req.api_version, req.correlation_id
        if key == API_VERSIONS:
            body = {"api_keys": served_api_versions()}
        elif key == METADATA:
            names = self.topics if req.body.topics is None else [t.name for t in req.body.topics]
            body = {
                "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "capture",
                "controller_id": 0,
                "topics": [
                    {
                        "name": n,
                        "topic_id": TOPIC_ID,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "leader_id": 0,
                                "leader_epoch": 0,
                                "replica_nodes": [0],
                                "isr_nodes": [0],
                            }
                        ],
                    }
                    for n in names
                ],
            }
        elif key == INIT_PRODUCER_ID:
            body = {"producer_id": 1000, "producer_epoch": 0}
        elif key == GET_TELEMETRY_SUBSCRIPTIONS:
            body = {"client_instance_id": uuid.uuid4(), "push_interval_ms": 300000, "requested_metrics": []}
        elif key == PRODUCE:
            body = {
                "responses": [
                    {
                        "name": t.name,
                        "partition_responses": [
                            {"index": p.index, "base_offset": 0, "log_start_offset": 0} for p in t.partition_data
                        ],
                    }
                    for t in req.body.topic_data
                ]
            }
        else:
            raise RuntimeError(f"capture responder does not answer API {key}")
        return encode_response(key, v, corr, body)

    async def serve_one(self, stream: trio.SocketStream) -> None:
        """Answer one client connection until it closes. A reset is a close too: a client that
        closes its socket with a response still unread in it (librdkafka destroying a producer
        whose flush returned) makes the kernel send RST instead of FIN."""
        with contextlib.suppress(trio.BrokenResourceError):
            await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        decoder, first = FrameDecoder(), True
        async with stream:
            while data := await stream.receive_some(65536):
                for frame in decoder.feed(data):
                    if first:
                        self.first_frames.append(frame)
                        first = False
                    if peek_header(frame)[0] == PRODUCE and decode_request(frame).body.acks == 0:
                        self.requests.append(decode_request(frame))
                        continue
                    await stream.send_all(self.answer(frame))


@contextlib.asynccontextmanager
async def capture_broker():
    """Run a capture responder for the duration of the block; yields its Capture."""
    capture = Capture()
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, capture.serve_one, 0, host="127.0.0.1"))
        capture.port = listeners[0].socket.getsockname()[1]
        yield capture
        nursery.cancel_scope.cancel()
