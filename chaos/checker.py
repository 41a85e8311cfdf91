"""The chaos checker: properties of a recorded history against the final logs (pure, no I/O).

History events (dicts, JSON lines on disk), each with `t` (seconds):
  send  {producer, partition, value}             a producer sent a record
  ack   {producer, partition, value, offset}     ... and it was acknowledged at that offset
  fail  {producer, partition, value, error}      ... or it failed (it may or may not be in the log)
  read  {consumer, partition, offset, value}     a consumer read a record
  hw    {consumer, partition, hw}                the high watermark a consumer was told
  leader {partition, leader}                     an observer's view of the partition's leader (-1: none)
  gread {consumer, partition, offset, value}     a member of the consumer group read a record
  committed {partition, offset}                  the group's committed offset, as an observer read it

Final state: for each partition, the records of every replica ({broker: [(offset, value)]}), the
final ISR and high watermark.

Properties (issue 9): (1) every acknowledged record is in the final leader's log at its offset;
(2) all ISR replicas hold identical records below the HW; (3) offsets are stable (what was read at
an offset is what the final log has there) and no consumer saw the HW go backwards; (4) with one
request in flight, a producer's records sit in its send order within a partition. Duplicates and
the longest leaderless window are reported, not judged.
With a consumer group in the history (issue 16): (5) every acknowledged record was read by the
group at least once; (6) the group's committed offsets never go backwards; (7) no record below a
committed offset was skipped (every offset of the final log below it was read by some member).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Report:
    attempted: int = 0
    acked: int = 0
    failed: int = 0
    lost: list = field(default_factory=list)  # acknowledged, absent at its offset
    divergent: list = field(default_factory=list)  # (partition, broker, first differing offset)
    unstable: list = field(default_factory=list)  # read/acked at an offset, something else there now
    hw_regressions: list = field(default_factory=list)  # (consumer, partition, before, after)
    reordered: list = field(default_factory=list)  # (producer, partition, value)
    duplicated: list = field(default_factory=list)  # values present more than once
    max_leaderless_s: float = 0.0
    unconsumed: list = field(default_factory=list)  # acknowledged, never read by the group
    commit_regressions: list = field(default_factory=list)  # (partition, before, after)
    skipped: list = field(default_factory=list)  # (partition, offset) below a commit, never read
    group_reads: int = 0
    mixed_group: bool | None = None  # a mixed-protocols scenario: its group was mid-migration
    #: chaos.liveness.Liveness of the run (judged apart from safety: `liveness.ok`), when measured
    liveness: Any = None

    JUDGED = (
        "lost",
        "divergent",
        "unstable",
        "hw_regressions",
        "reordered",
        "unconsumed",
        "commit_regressions",
        "skipped",
    )

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.JUDGED)

    def violations(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in self.JUDGED if getattr(self, name)}


def check(
    history: list[dict],
    replicas: dict[int, dict[int, list[tuple[int, bytes]]]],
    leaders: dict[int, int],
    isr: dict[int, list[int]],
    high_watermarks: dict[int, int],
    *,
    in_order: bool,
) -> Report:
    """replicas: {partition: {broker: [(offset, value)]}}; leaders: {partition: final leader};
    isr / high_watermarks: final, per partition. `in_order`: producers had one request in flight."""
    report = Report()
    final = {p: dict(replicas[p][leaders[p]]) for p in replicas if leaders.get(p, -1) in replicas[p]}
    counts = collections.Counter((p, v) for p, log in final.items() for v in log.values())
    report.duplicated = sorted({(p, v) for (p, v), n in counts.items() if n > 1})

    sends = [e for e in history if e["op"] == "send"]
    acks = [e for e in history if e["op"] == "ack"]
    report.attempted, report.acked = len(sends), len(acks)
    report.failed = sum(1 for e in history if e["op"] == "fail")

    present = {(p, v) for p, log in final.items() for v in log.values()}
    for e in acks:  # (1) and (3) for writes
        there = final.get(e["partition"], {}).get(e["offset"])
        if there == e["value"]:
            continue
        if (e["partition"], e["value"]) not in present:
            report.lost.append((e["partition"], e["offset"], e["value"]))  # gone (its offset may be reused)
        else:
            report.unstable.append((e["partition"], e["offset"], e["value"], there))  # moved elsewhere
    for p, logs in replicas.items():  # (2)
        hw = high_watermarks.get(p, 0)
        reference = [r for r in logs.get(leaders.get(p), []) if r[0] < hw]
        for broker in isr.get(p, []):
            mine = [r for r in logs.get(broker, []) if r[0] < hw]
            if mine != reference:
                first = next((a[0] for a, b in zip(mine, reference) if a != b), min(len(mine), len(reference)))
                report.divergent.append((p, broker, first))
    last_hw: dict[tuple, int] = {}
    for e in history:  # (3) for reads and HWs
        if e["op"] == "read":
            there = final.get(e["partition"], {}).get(e["offset"])
            if there != e["value"]:
                report.unstable.append((e["partition"], e["offset"], e["value"], there))
        elif e["op"] == "hw":
            key = (e["consumer"], e["partition"])
            if e["hw"] < last_hw.get(key, -1):
                report.hw_regressions.append((e["consumer"], e["partition"], last_hw[key], e["hw"]))
            last_hw[key] = max(last_hw.get(key, -1), e["hw"])
    if in_order:  # (4)
        positions: dict[tuple, list] = collections.defaultdict(list)
        where: dict[tuple, int] = {}
        for p, log in final.items():
            for o in sorted(log):
                where.setdefault((p, log[o]), o)  # a duplicate counts where it first landed
        for e in sends:
            offset = where.get((e["partition"], e["value"]))
            if offset is not None:
                positions[(e["producer"], e["partition"])].append((offset, e["value"]))
        for (producer, partition), seq in positions.items():
            for (a, _), (b, value) in zip(seq, seq[1:]):
                if b < a:
                    report.reordered.append((producer, partition, value))
    if any(e["op"] in ("gread", "committed") for e in history):
        _check_group(history, final, acks, report)
    leaderless_since: dict[int, float] = {}  # longest window without a leader
    for e in history:
        if e["op"] != "leader":
            continue
        p = e["partition"]
        if e["leader"] < 0:
            leaderless_since.setdefault(p, e["t"])
        elif p in leaderless_since:
            report.max_leaderless_s = max(report.max_leaderless_s, e["t"] - leaderless_since.pop(p))
    return report


def _check_group(history: list[dict], final: dict, acks: list[dict], report: Report) -> None:
    """Properties (5)-(7) of a consumer group's reads and commits."""
    reads = [e for e in history if e["op"] == "gread"]
    report.group_reads = len(reads)
    read_at = {(e["partition"], e["offset"]) for e in reads}
    for e in acks:  # (5)
        if (
            final.get(e["partition"], {}).get(e["offset"]) == e["value"]
            and (e["partition"], e["offset"]) not in read_at
        ):
            report.unconsumed.append((e["partition"], e["offset"]))
    highest: dict[int, int] = {}
    for e in history:  # (6)
        if e["op"] != "committed":
            continue
        p = e["partition"]
        if e["offset"] < highest.get(p, -1):
            report.commit_regressions.append((p, highest[p], e["offset"]))
        highest[p] = max(highest.get(p, -1), e["offset"])
    for p, committed in highest.items():  # (7)
        for offset in sorted(final.get(p, {})):
            if offset < committed and (p, offset) not in read_at:
                report.skipped.append((p, offset))
