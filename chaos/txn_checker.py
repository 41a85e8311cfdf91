"""Judging a transactional chaos history (chaos/transactions.py), pure and table-tested.

History events:
  txn_begin {txn, n}                    a producer began transaction `txn` with `n` records
  txn_end   {txn, outcome}              committed / aborted (the client said so) or unknown
  lso       {partition, offset}         a read_committed ListOffsets answer (the LSO) at that time
`visible` maps each record value `<txn>:<i>` a read_committed reader saw after the heal to how many
times it saw it.

Properties (each violation listed in the report):
1. atomicity: of every transaction, all `n` records are visible or none;
2. no record of an aborted transaction is visible;
3. every record of a committed transaction is visible;
4. no record is visible twice;
5. the LSO of a partition never goes backwards between observations.
Transactions with an unknown outcome only have to be atomic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TxnReport:
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    records_visible: int = 0
    partial: list[str] = field(default_factory=list)
    aborted_visible: list[str] = field(default_factory=list)
    committed_missing: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    lso_backwards: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, before, after)
    liveness: Any = None  # chaos.liveness.Liveness of the run (judged apart: `liveness.ok`)

    def violations(self) -> dict[str, int]:
        found = {
            "partial transactions": len(self.partial),
            "aborted records visible": len(self.aborted_visible),
            "committed transactions missing": len(self.committed_missing),
            "duplicated records": len(self.duplicated),
            "LSO went backwards": len(self.lso_backwards),
        }
        return {k: v for k, v in found.items() if v}

    @property
    def ok(self) -> bool:
        return not self.violations()


def check_transactions(history: list[dict], visible: dict[str, int]) -> TxnReport:
    report = TxnReport()
    sizes = {e["txn"]: e["n"] for e in history if e["op"] == "txn_begin"}
    outcomes = {e["txn"]: e["outcome"] for e in history if e["op"] == "txn_end"}
    seen: dict[str, int] = {}
    for value, times in visible.items():
        txn = value.rpartition(":")[0]
        seen[txn] = seen.get(txn, 0) + 1
        report.records_visible += times
        if times > 1:
            report.duplicated.append(value)
    for txn, n in sizes.items():
        outcome = outcomes.get(txn, "unknown")
        got = seen.get(txn, 0)
        if outcome == "committed":
            report.committed += 1
            if got < n:
                report.committed_missing.append(txn)
        elif outcome == "aborted":
            report.aborted += 1
            if got:
                report.aborted_visible.append(txn)
        else:
            report.unknown += 1
        if 0 < got < n and txn not in report.committed_missing:
            report.partial.append(txn)
    last: dict[int, int] = {}
    for e in history:
        if e["op"] == "lso":
            p, offset = e["partition"], e["offset"]
            if offset < last.get(p, -1):
                report.lso_backwards.append((p, last[p], offset))
            last[p] = max(last.get(p, -1), offset)
    return report
