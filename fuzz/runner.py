"""Drive one real broker with requests generated from the message specs (`fuzz.spec_requests`)
and judge it: a finding is a request after which the broker logged a handler failure (the
server's "API k vN from ... failed", a handler that raised or answered what cannot be encoded),
an answer that does not decode, or the broker's exit. RSS growth is measured from after a
warm-up to the end.

`run(host, port, log_path, pid, seed, seconds)` returns a Report; each finding keeps the request's
frame (the length prefix excluded), which `save` writes to a corpus directory and `replay`
sends again. `python -m fuzz.runner --seconds 300 [--seed N] [--save fuzz/corpus]` starts its own
ZooKeeper and broker in a temporary directory (`make fuzz`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import trio

from fuzz.spec_requests import RequestGenerator
from protocol.api import decode_response, encode_request, peek_header
from protocol.api_keys import ApiKey

CORPUS = Path(__file__).resolve().parent / "corpus"
#: what a handler failure leaves in the broker's log: an exception's traceback (every handler
#: failure is logged with one), the "no error response" line, or any ERROR / CRITICAL record (a
#: log dir taken offline among them). INFO lines that say "failed" report events around the
#: broker (a ZooKeeper session that expired), not a request it mishandled.
FAILURE_MARKERS = ("Traceback", "no error response for API", " ERROR [", " CRITICAL [")
WARM_UP_REQUESTS = 300
#: a one-broker cluster that serves groups and transactions (internal topics at RF 1)
ONE_BROKER = {
    "offsets_topic_replication_factor": 1,
    "offsets_topic_num_partitions": 4,
    "group_initial_rebalance_delay_ms": 0,
    "transaction_state_log_replication_factor": 1,
    "transaction_state_log_min_isr": 1,
    # Kafka's default, not the test clusters' 3 s: one broker has nowhere to fail over to, and a
    # CPU-starved CI run once lost its session under the fuzzer's load ("brokers [1] failed")
    "zookeeper_session_timeout_ms": 18000,
}


@dataclass
class Finding:
    api_key: int
    version: int
    what: str
    frame: bytes

    @property
    def name(self) -> str:
        digest = hashlib.sha1(self.frame).hexdigest()[:12]
        return f"{ApiKey(self.api_key).name.lower()}-v{self.version}-{digest}.bin"


@dataclass
class Report:
    requests: int = 0
    answered: int = 0
    closed: int = 0  # connections the broker closed (unsupported state, SASL order, ...)
    unanswered: int = 0  # no answer within the per-request timeout (long polls, delayed joins)
    findings: list[Finding] = field(default_factory=list)
    rss_start_kb: int = 0
    rss_end_kb: int = 0
    per_api: dict[str, int] = field(default_factory=dict)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class _LogTail:
    """New text of the broker's log since the last look."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def new(self) -> str:
        if not self.path.exists():
            return ""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return data.decode(errors="replace")


class _Link:
    """One connection that is reopened whenever the broker closes it."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.stream: trio.SocketStream | None = None
        self.buffer = b""

    async def exchange(self, frame: bytes, timeout_s: float, expect_answer: bool) -> bytes | None:
        """Send one frame; its answer's payload, None when the broker closed the connection
        (or it stayed silent for `timeout_s`, after which the connection is dropped)."""
        if self.stream is None:
            self.stream = await trio.open_tcp_stream(self.host, self.port)
            self.buffer = b""
        try:
            await self.stream.send_all(len(frame).to_bytes(4, "big") + frame)
            if not expect_answer:
                return b""
            with trio.fail_after(timeout_s):
                while True:
                    if len(self.buffer) >= 4:
                        size = int.from_bytes(self.buffer[:4], "big")
                        if len(self.buffer) >= 4 + size:
                            payload, self.buffer = self.buffer[4 : 4 + size], self.buffer[4 + size :]
                            return payload
                    chunk = await self.stream.receive_some(1 << 16)
                    if not chunk:
                        raise trio.BrokenResourceError
                    self.buffer += chunk
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError):
            await self.close()
            return None

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None


async def _one(link: _Link, log: _LogTail, frame: bytes, report: Report, timeout_s: float, alive) -> None:
    api_key, version, correlation_id = peek_header(frame)
    report.requests += 1
    name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
    report.per_api[name] = report.per_api.get(name, 0) + 1
    answer = await link.exchange(frame, timeout_s, expect_answer=not _no_answer(frame))
    if answer is None:
        report.closed += 1
    elif answer:
        report.answered += 1
        try:
            got, _ = decode_response(api_key, version, answer)
            if got != correlation_id:
                report.findings.append(Finding(api_key, version, f"correlation id {got} != {correlation_id}", frame))
        except Exception as e:
            report.findings.append(Finding(api_key, version, f"answer does not decode: {e}", frame))
    failure = failure_in(log.new())
    if failure is not None:
        report.findings.append(Finding(api_key, version, failure, frame))
    if not alive():
        report.findings.append(Finding(api_key, version, "the broker exited", frame))


def failure_in(said: str) -> str | None:
    """The line (at most 300 characters) that shows a failure in the broker log text `said`, or
    None when it shows none (see FAILURE_MARKERS)."""
    if not any(marker in said for marker in FAILURE_MARKERS):
        return None
    lines = [line for line in said.splitlines() if any(m in line for m in (*FAILURE_MARKERS, "Error"))]
    return (lines or [said])[-1][-300:]


def _no_answer(frame: bytes) -> bool:
    """Produce with acks=0 is not answered; the generator never sends it (acks is set to 1)."""
    return False


async def run(
    host: str, port: int, log_path: Path, pid: int, seed: int, seconds: float, timeout_s: float = 2.0
) -> Report:
    """Generated requests for `seconds` (after a warm-up of WARM_UP_REQUESTS), one at a time."""
    generator = RequestGenerator(seed)
    report = Report()
    log = _LogTail(log_path)
    link = _Link(host, port)

    def alive() -> bool:
        return Path(f"/proc/{pid}").exists()

    deadline = None
    correlation = 0
    while deadline is None or trio.current_time() < deadline:
        api_key, version, body = generator.request()
        if api_key == ApiKey.PRODUCE and body.get("acks") == 0:
            body["acks"] = 1
        correlation += 1
        try:
            frame = bytes(encode_request(api_key, version, correlation, body, client_id=generator.client_id()))[4:]
        except Exception:  # a combination the schema refuses to build (e.g. a field's range)
            continue
        await _one(link, log, frame, report, timeout_s, alive)
        if report.requests == WARM_UP_REQUESTS:
            report.rss_start_kb = rss_kb(pid)
            deadline = trio.current_time() + seconds
        if not alive():
            break
    await link.close()
    if alive():
        report.rss_end_kb = rss_kb(pid)
    return report


async def replay(host: str, port: int, log_path: Path, pid: int, frames: list[bytes], timeout_s: float = 2.0) -> Report:
    """Send each saved frame once (the corpus), judged as in `run`."""
    report = Report()
    log = _LogTail(log_path)
    link = _Link(host, port)
    for frame in frames:
        await _one(link, log, frame, report, timeout_s, lambda: Path(f"/proc/{pid}").exists())
    await link.close()
    return report


def corpus_frames(directory: Path = CORPUS) -> list[bytes]:
    return [p.read_bytes() for p in sorted(directory.glob("*.bin"))]


def save(findings: list[Finding], directory: Path = CORPUS) -> list[Path]:
    """Write one frame per distinct (API, version, finding) to `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    paths, seen = [], set()
    for finding in findings:
        kind = (finding.api_key, finding.version, finding.what.split(":")[0][-80:])
        if kind in seen:
            continue
        seen.add(kind)
        path = directory / finding.name
        path.write_bytes(finding.frame)
        paths.append(path)
    return paths


def summary(report: Report) -> str:
    growth = (report.rss_end_kb - report.rss_start_kb) / 1024
    lines = [
        f"requests {report.requests}: answered {report.answered}, connection closed {report.closed}, "
        f"findings {len(report.findings)}; RSS {report.rss_start_kb / 1024:.0f} -> {report.rss_end_kb / 1024:.0f} MB "
        f"({growth:+.0f} MB)",
        "per API: " + ", ".join(f"{k} {v}" for k, v in sorted(report.per_api.items())),
    ]
    lines += [f"  {f.name}: {f.what}" for f in report.findings]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from local_cluster.brokers import LOG, BrokerProcess
    from local_cluster.zookeeper import ZooKeeperProcess

    parser = argparse.ArgumentParser(prog="python -m fuzz.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "big"))
    parser.add_argument("--save", type=Path, default=None, help="write findings' frames here (a corpus)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperProcess.start(Path(tmp) / "zk")
        broker = BrokerProcess.create(1, Path(tmp) / "broker", zk.connect, **ONE_BROKER).start()
        try:
            print(f"seed {args.seed}, {args.seconds:.0f} s against broker 1 at {broker.host}:{broker.port}")
            report = trio.run(
                run, broker.host, broker.port, broker.directory / LOG, broker.process.pid, args.seed, args.seconds
            )
            print(summary(report))
            if args.save and report.findings:
                for path in save(report.findings, args.save):
                    print(f"saved {path}")
            return 1 if report.findings else 0
        finally:
            broker.kill()
            zk.stop()


if __name__ == "__main__":
    sys.exit(main())
