"""The anomaly checker of the analysis-style workload (`chaos/analysis.py`), pure: a history in,
a count per anomaly class out, every class named and counted, zero or not. The classes are the
ones the public analyses of Kafka-compatible systems look for, as defined here:

- lost write: an acknowledged value (a plain send delivered, or a send of a committed transaction)
  absent from the final read_committed read;
- unseen write: an acknowledged value no consumer of the workload polled (they read until the
  end offsets before stopping);
- duplicate: a value at more than one (partition, offset);
- poll skip: a consumer, within one assignment, polled offsets o1 then o2 of a partition while the
  final read holds a record strictly between them;
- non-monotonic poll: a consumer, within one assignment, polled an offset of a partition not above
  the one it polled before;
- aborted read: a value of an aborted transaction was polled or is in the final read;
- inconsistent offsets: one (partition, offset) seen with two different values (deliveries,
  polls, final read);
- internal send skip: within one committed transaction, a later send to a partition landed at a
  lower offset than an earlier send of that transaction to the same partition;
- torn transaction: a transaction (committed, or of unknown outcome) of which the final read holds
  some delivered values and not others (atomicity: all or nothing);
- stuck LSO: a partition whose last stable offset stayed at one value below its high watermark
  for longer than the bound (`transaction.timeout.ms` + 15 s: by then the coordinator has aborted
  whatever was open, so only a transaction nothing will end, a hanging one, holds it).

Aborted reads are Adya's G1a; lost writes, torn transactions and a stuck LSO are the other
transactional anomalies Jepsen's 2024 analysis of Kafka's transaction protocol looked for.

History events (dicts, `op` first):
  send      {value, partition, txn (None for plain sends)}
  delivered {value, partition, offset}          the producer's delivery report
  txn       {txn, outcome: commit | abort | unknown}
  assign    {consumer}                          a new assignment: poll expectations restart
  poll      {consumer, partition, offset, value}
  final     {partition, offset, value}          the final full read_committed read
  offsets   {partition, hw, lso, at_s}           a sample of a partition's HW and LSO (monotonic s)
  bound     {lso_s}                              the stuck-LSO bound, in s
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

CLASSES = (
    "lost write",
    "unseen write",
    "duplicate",
    "poll skip",
    "non-monotonic poll",
    "aborted read",
    "inconsistent offsets",
    "internal send skip",
    "torn transaction",
    "stuck LSO",
)


@dataclass
class AnalysisReport:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    examples: dict[str, list] = field(default_factory=dict)  # a few instances per class
    acknowledged: int = 0
    final_records: int = 0
    transactions: dict[str, int] = field(default_factory=dict)  # outcome -> how many
    liveness: Any = None  # chaos.liveness.Liveness of the run (judged apart: `liveness.ok`)

    def add(self, cls: str, example) -> None:
        self.counts[cls] += 1
        self.examples.setdefault(cls, [])
        if len(self.examples[cls]) < 5:
            self.examples[cls].append(example)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def line(self) -> str:
        return ", ".join(f"{cls} {n}" for cls, n in self.counts.items())


def check(history: list[dict]) -> AnalysisReport:
    report = AnalysisReport()
    outcome = {e["txn"]: e["outcome"] for e in history if e["op"] == "txn"}
    for o in outcome.values():
        report.transactions[o] = report.transactions.get(o, 0) + 1
    sends = [e for e in history if e["op"] == "send"]
    txn_of = {e["value"]: e["txn"] for e in sends}
    delivered = {e["value"]: (e["partition"], e["offset"]) for e in history if e["op"] == "delivered"}
    final = [e for e in history if e["op"] == "final"]
    polls = [e for e in history if e["op"] == "poll"]
    report.final_records = len(final)

    acknowledged = {v for v in delivered if txn_of.get(v) is None or outcome.get(txn_of[v]) == "commit"}
    report.acknowledged = len(acknowledged)
    aborted = {v for v, t in txn_of.items() if t is not None and outcome.get(t) == "abort"}
    final_values = {e["value"] for e in final}
    polled_values = {e["value"] for e in polls}

    for v in sorted(acknowledged - final_values):
        report.add("lost write", v)
    for v in sorted(acknowledged - polled_values):
        report.add("unseen write", v)

    places: dict[str, set[tuple[int, int]]] = {}
    values_at: dict[tuple[int, int], set[str]] = {}
    for v, (p, o) in delivered.items():
        values_at.setdefault((p, o), set()).add(v)
    for e in final + polls:
        places.setdefault(e["value"], set()).add((e["partition"], e["offset"]))
        values_at.setdefault((e["partition"], e["offset"]), set()).add(e["value"])
    for v, where in sorted(places.items()):
        if len(where) > 1:
            report.add("duplicate", (v, sorted(where)))
    for (p, o), vs in sorted(values_at.items()):
        if len(vs) > 1:
            report.add("inconsistent offsets", (p, o, sorted(vs)))
    for v in sorted((polled_values | final_values) & aborted):
        report.add("aborted read", v)

    final_offsets: dict[int, list[int]] = {}
    for e in final:
        final_offsets.setdefault(e["partition"], []).append(e["offset"])
    for offsets in final_offsets.values():
        offsets.sort()
    last: dict[tuple[str, int], int] = {}
    for e in history:
        if e["op"] == "assign":
            for key in [k for k in last if k[0] == e["consumer"]]:
                del last[key]
        elif e["op"] == "poll":
            key, o = (e["consumer"], e["partition"]), e["offset"]
            before = last.get(key)
            if before is not None:
                if o <= before:
                    report.add("non-monotonic poll", (e["consumer"], e["partition"], before, o))
                elif _between(final_offsets.get(e["partition"], []), before, o):
                    report.add("poll skip", (e["consumer"], e["partition"], before, o))
            last[key] = o

    by_txn: dict[object, list[dict]] = {}
    for e in sends:
        if e["txn"] is not None and outcome.get(e["txn"]) == "commit":
            by_txn.setdefault(e["txn"], []).append(e)
    for txn, txn_sends in by_txn.items():
        highest: dict[int, int] = {}
        for e in txn_sends:  # in send order
            place = delivered.get(e["value"])
            if place is None:
                continue
            p, o = place
            if p in highest and o < highest[p]:
                report.add("internal send skip", (txn, p, highest[p], o))
            highest[p] = max(highest.get(p, o), o)
    _check_torn(report, sends, outcome, delivered, final_values)
    _check_lso(report, history)
    return report


def _check_torn(report: AnalysisReport, sends: list[dict], outcome: dict, delivered: dict, final_values: set) -> None:
    """Committed (or unknown) transactions must be visible whole or not at all."""
    members: dict[object, list[str]] = {}
    for e in sends:
        if e["txn"] is not None and outcome.get(e["txn"]) in ("commit", "unknown") and e["value"] in delivered:
            members.setdefault(e["txn"], []).append(e["value"])
    for txn, values in members.items():
        seen = [v for v in values if v in final_values]
        if seen and len(seen) < len(values):
            report.add("torn transaction", (txn, sorted(seen), sorted(set(values) - set(seen))))


def _check_lso(report: AnalysisReport, history: list[dict]) -> None:
    """A partition's LSO held below its HW, unchanged, for longer than the bound."""
    bounds = [e["lso_s"] for e in history if e["op"] == "bound"]
    if not bounds:
        return
    bound = bounds[-1]
    since: dict[int, tuple[int, float]] = {}  # partition -> (stuck LSO, first seen at)
    reported: set[tuple[int, int]] = set()
    for e in history:
        if e["op"] != "offsets":
            continue
        p, lso, hw, at = e["partition"], e["lso"], e["hw"], e["at_s"]
        if lso >= hw:
            since.pop(p, None)
            continue
        held = since.get(p)
        if held is None or held[0] != lso:
            since[p] = (lso, at)
        elif at - held[1] > bound and (p, lso) not in reported:
            reported.add((p, lso))
            report.add("stuck LSO", (p, lso, round(at - held[1], 1)))


def _between(sorted_offsets: list[int], low: int, high: int) -> list[int]:
    """The offsets strictly between `low` and `high` (bisect on the sorted list)."""
    return sorted_offsets[bisect.bisect_right(sorted_offsets, low) : bisect.bisect_left(sorted_offsets, high)]
