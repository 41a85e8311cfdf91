"""The leader's work per one-record RF 3 acks=all Produce, in one quiet process (issue 48).

The cluster's per-request CPU rows move by 5-10% between runs on a shared 2-core machine, more
than most single changes to the hot path. This bench measures the same work with nothing else
running and no sockets, so a change can be judged by it: one cycle is
1. a Produce v9 request frame decoded (`protocol.api.decode_request`),
2. its batch appended as a client's (`ReplicaManager.append_records`, acks=-1: a DelayedProduce),
3. a Fetch v12 frame from each of the two followers decoded and served (`ReplicaManager.fetch_now`),
   in the follower's incremental fetch session (KIP-227) as a replica fetcher sends it: each reads
   the new batch and reports the follower's log end, which moves the high watermark and completes
   the previous cycle's delayed produce,
4. every response encoded (`encode_response_parts`): the Produce's and the two Fetches'.
Real logs in a temporary directory; the delayed operations' timer and ready-fetch tasks run; the
garbage collector's thresholds are the broker's.

`python -m bench.produce_path_bench [--requests N] [--profile] [--gap-us N [--busy-gap]]
[--idle-partitions N] [--per-turn K]` prints µs per cycle (process CPU time) and, with --profile, the cProfile
entries that cost most. `--idle-partitions N` puts N more partitions led here, never appended to,
in both followers' fetch sessions: what a session's idle partitions cost each fetch. With
`--gap-us`, each cycle is followed by a pause of that many µs, and only the cycles' own CPU time
(the thread's) is counted: by default the process sleeps through the pause, as a broker waiting
for its next request does; with `--busy-gap` it spins instead. The two figures' difference is
what waking from idle costs the same work on this machine (caches and the vCPU's state after a
sleep), which the cluster's moderate-rate rows pay and a hot loop does not. `make bench`'s goal table
(`bench/goals_bench.py`) shows the figure beside the leader CPU rows.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import trio

from broker.config import build_config
from broker.handlers.fetch import response_body
from broker.handlers.produce import _responses
from broker.main import GC_THRESHOLDS
from broker.metadata_cache import MetadataCache
from broker.replica_manager import ReplicaManager
from protocol import record_batch as rb
from protocol.api import decode_request, encode_request, encode_response_parts
from protocol.framing import FrameDecoder
from storage.append_origin import AppendOrigin
from storage.log_manager import LogManager

TOPIC = "t"


def _frame(api_key: int, version: int, body: dict, client_id: str) -> bytes:
    (frame,) = FrameDecoder().feed(encode_request(api_key, version, 1, body, client_id=client_id))
    return bytes(frame)


def _produce_frame() -> bytes:
    batch = rb.build_batch([(b"k", b"v" * 100)])
    partition = {"index": 0, "records": batch}
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [
        {"name": TOPIC, "partition_data": [partition]}]}  # fmt: skip
    return _frame(0, 9, body, "perf")


def _fetch_frame(
    replica: int, offset: int, session_id: int, idle: int = 0, epoch: int | None = None, max_wait_ms: int = 0
) -> bytes:
    """Replica `replica`'s Fetch at `offset` in its incremental fetch session (KIP-227), as
    `broker/replica_fetcher.py` sends them: the first (offset 0) opens the session (epoch 0) with
    partition 0 and the `idle` partitions 1.., each later one lists partition 0, whose fetch
    offset moved, at session epoch `epoch` (default: `offset`, one record a cycle), waiting up to
    `max_wait_ms` for data."""
    epoch = offset if epoch is None else epoch
    listed = range(idle + 1) if offset == 0 else (0,)
    partitions = [{"partition": i, "fetch_offset": offset if i == 0 else 0, "partition_max_bytes": 1 << 20}
                  for i in listed]  # fmt: skip
    body = {"replica_id": replica, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "session_id": session_id if offset else 0, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "partitions": partitions}]}  # fmt: skip
    return _frame(1, 12, body, f"replica-{replica}")


def _leader_and_isr(idle: int = 0) -> dict:
    states = [{"partition_index": i, "controller_epoch": 1, "leader": 1, "leader_epoch": 0, "isr": [1, 2, 3],
               "replicas": [1, 2, 3], "partition_epoch": 0} for i in range(idle + 1)]  # fmt: skip
    body = {"controller_id": 9, "controller_epoch": 1, "broker_epoch": -1,
            "topic_states": [{"topic_name": TOPIC, "partition_states": states}]}  # fmt: skip
    return decode_request(_frame(4, 7, body, "controller")).body


def _pause(gap_s: float, busy: bool) -> None:
    if not busy:
        time.sleep(gap_s)
        return
    end = time.perf_counter() + gap_s
    while time.perf_counter() < end:
        pass


@contextlib.asynccontextmanager
async def _leader(root: Path, idle: int = 0):
    """A replica manager leading partition 0 of `t` (and `idle` more) with replicas 1-3, over
    real logs under `root`, with the broker's garbage collector thresholds (broker/main.py)."""
    gc.set_threshold(*GC_THRESHOLDS)
    props = {"broker.id": "1", "zookeeper.connect": "h:1", "log.dirs": str(root), "min.insync.replicas": "2"}
    config = build_config(props)
    topic_configs = config.topic_configs()
    logs = LogManager(config.log_dirs, config.log_config(), topic_config=topic_configs.log_config)
    logs.startup()
    try:
        rm = ReplicaManager(config, logs, MetadataCache(), topic_configs)
        await rm.become_leader_or_follower(_leader_and_isr(idle), 7)
        yield rm
    finally:
        logs.shutdown()


async def _cycles(
    root: Path, requests: int, profile: cProfile.Profile | None, gap_s: float = 0.0, busy: bool = False, idle: int = 0
) -> float:
    async with _leader(root, idle) as rm:
        produce = _produce_frame()
        warm = min(200, requests // 10)
        # the first cycle opens replica 2's session (id 1), then replica 3's (id 2)
        fetches = {(r, i): _fetch_frame(r, i, r - 1, idle) for r in (2, 3) for i in range(requests)}
        answered: list = []

        def cycle(i: int) -> None:
            request = decode_request(produce)
            entries = {(t.name, p.index): p.records for t in request.body.topic_data for p in t.partition_data}
            result = rm.append_records(entries, request.body.acks, request.body.timeout_ms, AppendOrigin.CLIENT)
            result.on_complete(
                lambda r: answered.append(
                    encode_response_parts(0, 9, 1, {"responses": _responses(r), "throttle_time_ms": 0})
                )  # fmt: skip
            )
            for replica in (2, 3):
                fetch = decode_request(fetches[(replica, i)])
                rm.fetch_now(fetch.body, None, 12, fetched)

        def fetched(result) -> None:
            # a session's fetch, and it found the session (an error would be cheaper to answer)
            assert result.error_code == 0 and result.session_id > 0, result
            answered.append(encode_response_parts(1, 12, 1, response_body(result)))

        async with trio.open_nursery() as nursery:
            await nursery.start(rm.delayed_timer.run)
            await nursery.start(rm.turn_end.run)  # the ready fetches' pass
            for i in range(warm):
                cycle(i)
            started = time.process_time()
            if profile is not None:
                profile.enable()
            if gap_s > 0:
                elapsed = 0.0
                for i in range(warm, requests):
                    before = time.thread_time()
                    cycle(i)
                    elapsed += time.thread_time() - before
                    _pause(gap_s, busy)
            else:
                for i in range(warm, requests):
                    cycle(i)
            if profile is not None:
                profile.disable()
            if gap_s <= 0:
                elapsed = time.process_time() - started
            nursery.cancel_scope.cancel()
        # every cycle's produce was answered by the next cycle's fetches, every fetch at once
        assert len(answered) >= 3 * requests - 1, (len(answered), requests)
        return elapsed / (requests - warm) * 1e6


async def _turn_cycles(
    root: Path, requests: int, per_turn: int, grouped: bool, profile: cProfile.Profile | None
) -> float:
    """The leader's steady state under `per_turn` Produce requests a loop turn (as many
    connections' requests read in one epoll round), one record each, RF 3 acks=-1, with both
    followers long-polling as replica fetchers do. Each cycle: the requests are made through the
    Produce handler's path (`append_records_soon`: written as one at the turn's end) or, with
    `grouped` False, through `append_records` one by one (each written at once); the turn ends,
    and its pass answers the followers' waiting fetches with the new records; each follower then
    fetches again from its new LEO, which moves the HW, completes the requests, and waits. ->
    CPU µs per Produce request."""
    async with _leader(root) as rm:
        produce = _produce_frame()
        cycles = max(20, requests // per_turn)
        warm = min(200, cycles // 10)
        fetches = {
            (r, i): _fetch_frame(r, i * per_turn, r - 1, epoch=i, max_wait_ms=30_000) for r in (2, 3) for i in range(cycles + 1)
        }  # fmt: skip
        answered: list = []
        records_fetched = [0]

        def respond(results) -> None:
            answered.append(encode_response_parts(0, 9, 1, {"responses": _responses(results), "throttle_time_ms": 0}))

        def fetched(result) -> None:
            assert result.error_code == 0 and result.session_id > 0, result
            records_fetched[0] += 1
            answered.append(encode_response_parts(1, 12, 1, response_body(result)))

        def follow(i: int) -> None:
            for replica in (2, 3):
                rm.fetch_now(decode_request(fetches[(replica, i)]).body, None, 12, fetched)

        async def cycle(i: int) -> None:
            expected = records_fetched[0] + 2
            for _ in range(per_turn):
                request = decode_request(produce)
                body = request.body
                entries = {(t.name, p.index): p.records for t in body.topic_data for p in t.partition_data}
                if grouped:
                    rm.append_records_soon(entries, body.acks, body.timeout_ms, respond)
                else:
                    rm.append_records(entries, body.acks, body.timeout_ms, AppendOrigin.CLIENT).on_complete(respond)
            while records_fetched[0] < expected:  # the turn ends: its pass answers the waiting fetches
                await trio.lowlevel.checkpoint()
            follow(i + 1)  # the followers' next fetches, from their new LEO

        async with trio.open_nursery() as nursery:
            await nursery.start(rm.delayed_timer.run)
            await nursery.start(rm.turn_end.run)
            follow(0)  # both sessions open and wait
            for i in range(warm):
                await cycle(i)
            started = time.process_time()
            if profile is not None:
                profile.enable()
            for i in range(warm, cycles):
                await cycle(i)
            if profile is not None:
                profile.disable()
            elapsed = time.process_time() - started
            nursery.cancel_scope.cancel()
        assert len(answered) >= (per_turn + 2) * cycles, (len(answered), cycles)
        return elapsed / ((cycles - warm) * per_turn) * 1e6


def per_turn_us(requests: int, per_turn: int, grouped: bool = True, profile: cProfile.Profile | None = None) -> float:
    """CPU µs per Produce request when `per_turn` of them come in each loop turn (`_turn_cycles`)."""
    with tempfile.TemporaryDirectory() as tmp:
        return trio.run(_turn_cycles, Path(tmp), requests, per_turn, grouped, profile)


def cycle_us(
    requests: int = 20_000,
    profile: cProfile.Profile | None = None,
    gap_us: float = 0.0,
    busy_gap: bool = False,
    idle_partitions: int = 0,
) -> float:
    """CPU µs per cycle (see the module doc), over `requests` cycles after a warm-up: the
    process's CPU time, or with `gap_us` > 0 (a pause after each cycle: a sleep, or a spin with
    `busy_gap`) the cycles' own thread CPU time, pauses excluded."""
    with tempfile.TemporaryDirectory() as tmp:
        return trio.run(_cycles, Path(tmp), requests, profile, gap_us / 1e6, busy_gap, idle_partitions)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="the leader's Produce cycle in one quiet process (issue 48)")
    parser.add_argument("--requests", type=int, default=20_000, help="cycles to run (default 20,000)")
    parser.add_argument("--profile", action="store_true", help="print the cProfile entries that cost most")
    parser.add_argument("--gap-us", type=float, default=0.0, help="pause after each cycle, µs (default none)")
    parser.add_argument("--busy-gap", action="store_true", help="spin through the pause instead of sleeping")
    parser.add_argument(
        "--idle-partitions",
        type=int,
        default=0,
        help="more partitions led here, in both followers' fetch sessions, that get no appends (default 0)",
    )
    parser.add_argument(
        "--per-turn",
        type=int,
        default=0,
        help="K Produce requests per loop turn, written as one per partition, then both follower fetches: "
        "prints µs per request, grouped and one by one (default: the one-request cycle)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.per_turn <= 1000:
        parser.error("--per-turn must be between 0 and 1,000")
    if args.per_turn:
        profile = cProfile.Profile() if args.profile else None
        for grouped in (False, True):
            us = per_turn_us(args.requests, args.per_turn, grouped, profile if grouped else None)
            how = "written as one at the turn's end" if grouped else "each written at once"
            print(
                f"{us:.1f} µs per request: {args.per_turn} Produce requests per loop turn, {how}, then two follower fetches"
            )
        _print_profile(profile)
        return 0
    if args.requests < 100:
        parser.error("--requests must be at least 100")
    if not 0 <= args.gap_us <= 1_000_000:
        parser.error("--gap-us must be between 0 and 1,000,000")
    if args.busy_gap and not args.gap_us:
        parser.error("--busy-gap needs --gap-us")
    if not 0 <= args.idle_partitions <= 10_000:
        parser.error("--idle-partitions must be between 0 and 10,000")
    profile = cProfile.Profile() if args.profile else None
    us = cycle_us(args.requests, profile, args.gap_us, args.busy_gap, args.idle_partitions)
    after = f", each after a {args.gap_us:,.0f} µs {'spin' if args.busy_gap else 'sleep'}" if args.gap_us else ""
    if args.idle_partitions:
        after += f", {args.idle_partitions} idle partitions in each fetch session"
    print(
        f"{us:.1f} µs per cycle: Produce v9 of one record, RF 3 acks=-1, two follower fetches, three responses{after}"
    )
    _print_profile(profile)
    return 0


def _print_profile(profile: cProfile.Profile | None) -> None:
    """The cProfile entries that cost most (nothing without a profile)."""
    if profile is not None:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(30)
        print(out.getvalue())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
