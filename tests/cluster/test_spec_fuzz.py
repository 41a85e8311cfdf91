"""Handlers never raise on a request that parsed (issue 34): requests generated from the message
specs (every served API and version, boundary values; `fuzz/`) against a real broker for a
bounded time with a fixed seed, and the corpus of inputs that once failed, replayed. A finding
is a handler failure in the broker's log, an answer that does not decode, or the broker's exit;
RSS may not grow past a bound."""

import os

import pytest
import trio

from client.connection import Connection
from fuzz.runner import ONE_BROKER, corpus_frames, replay, run, summary
from local_cluster.brokers import LOG
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

pytestmark = pytest.mark.slow  # starts ZooKeeper and a broker

SEED = int(os.environ.get("FUZZ_SEED", "20261126"))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "45"))
RSS_GROWTH_BOUND_MB = 200
#: one broker serving groups and transactions (their internal topics at RF 1)
BROKER = ONE_BROKER


async def _group_coordinator_ready(broker) -> None:
    """__consumer_offsets created and loaded (so JoinGroup frames reach the coordinator)."""
    async with Connection.open(broker.host, broker.port) as conn:
        with trio.fail_after(60):
            while True:
                found = await conn.request(ApiKey.FIND_COORDINATOR, {"key": "fuzz-group", "key_type": 0}, version=3)
                if found.error_code == ErrorCode.NONE:
                    joined = await conn.request(
                        ApiKey.JOIN_GROUP,
                        {
                            "group_id": "probe",
                            "session_timeout_ms": 10000,
                            "member_id": "",
                            "protocol_type": "consumer",
                            "protocols": [{"name": "range", "metadata": b""}],
                        },
                        version=4,
                    )
                    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                        return
                await trio.sleep(0.2)


def test_the_corpus_of_inputs_that_once_failed_is_answered(start_broker):
    broker = start_broker(1, **BROKER)
    trio.run(_group_coordinator_ready, broker)
    frames = corpus_frames()
    assert len(frames) >= 4
    report = trio.run(replay, broker.host, broker.port, broker.directory / LOG, broker.process.pid, frames)
    assert not report.findings, summary(report)
    assert report.answered == len(frames), summary(report)


def test_generated_requests_find_nothing(start_broker):
    broker = start_broker(1, **BROKER)
    report = trio.run(run, broker.host, broker.port, broker.directory / LOG, broker.process.pid, SEED, SECONDS)
    print(f"seed {SEED}: " + summary(report))
    assert not report.findings, f"seed {SEED}: " + summary(report)
    assert broker.process.poll() is None
    assert report.requests > 1000 and len(report.per_api) >= 40, summary(report)
    assert (report.rss_end_kb - report.rss_start_kb) / 1024 < RSS_GROWTH_BOUND_MB, summary(report)
