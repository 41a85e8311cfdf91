"""`python -m chaos` (`make chaos`): every chaos scenario in turn against local 3-broker clusters,
one row each (safety and liveness verdicts); exit status 1 when any scenario failed. The
scenarios live in `chaos/runner.py` (workload, nemeses), `chaos/transactions.py`,
`chaos/eos.py` and `chaos/analysis.py`, which import the runner, never this module.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
from pathlib import Path

import trio

from chaos.analysis import run_analysis_scenario
from chaos.eos import run_eos_scenario
from chaos.late_write import NAME as LATE_WRITE_SCENARIO
from chaos.late_write import run_late_write_scenario
from chaos.runner import (
    ANALYSIS_SCENARIO,
    EOS_SCENARIO,
    SCENARIOS,
    TXN_SCENARIO,
    format_row,
    iptables_works,
    run_scenario,
    special_row,
    tmpfs_works,
)
from chaos.share_groups import NAME as SHARE_SCENARIO
from chaos.share_groups import run_share_scenario, summary
from chaos.transactions import run_txn_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="chaos scenarios against a local 3-broker cluster")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(SCENARIOS)
        + [TXN_SCENARIO, EOS_SCENARIO, ANALYSIS_SCENARIO, LATE_WRITE_SCENARIO, SHARE_SCENARIO],
        help="run only these scenarios",
    )
    parser.add_argument("--dir", type=Path, default=None, help="keep histories and logs here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"chaos seed {seed} (--seed {seed} reproduces this run)")
    root = args.dir or Path(tempfile.mkdtemp(prefix="minikafka-chaos-"))
    print(
        f"{'scenario':20} {'sent':>7} {'acked':>6} {'failed':>6} {'lost':>5} {'dups':>5} {'no leader s':>10} "
        f"{'heal s':>6}  verdict (safety, liveness)"
    )
    failures = 0
    everything = list(SCENARIOS) + [TXN_SCENARIO, EOS_SCENARIO, ANALYSIS_SCENARIO, LATE_WRITE_SCENARIO, SHARE_SCENARIO]
    for name in args.only or everything:
        if name == "partition-broker" and not iptables_works():
            print(f"{name:20} skipped: iptables does not work on this machine (needs root and CAP_NET_ADMIN)")
            continue
        if name == "disk-full" and not tmpfs_works(root):
            print(f"{name:20} skipped: a tmpfs cannot be mounted on this machine (needs root)")
            continue
        if name == ANALYSIS_SCENARIO:
            analysis, what = trio.run(run_analysis_scenario, seed, root)
            failures += special_row(
                name,
                f"transactions {analysis.transactions}, acknowledged {analysis.acknowledged}, final read "
                f"{analysis.final_records}: {analysis.line()}",
                {c: n for c, n in analysis.counts.items() if n},
                analysis.liveness.violations(),
                f"{what}; {analysis.liveness.summary()}",
            )
            continue
        if name == SHARE_SCENARIO:
            share, what = trio.run(run_share_scenario, seed, root)
            failures += special_row(
                name,
                summary(share),
                share.share.violations(),
                share.liveness.violations() if share.liveness is not None else [],
                what,
            )
            continue
        if name == LATE_WRITE_SCENARIO:
            late, what = trio.run(run_late_write_scenario, seed, root)
            a = late.analysis
            failures += special_row(
                name,
                f"transactions {a.transactions}, acknowledged {a.acknowledged}: {a.line()}",
                {c: n for c, n in a.counts.items() if n} or ([] if late.ok else ["the late write was not judged"]),
                [],
                what,
            )
            continue
        if name == EOS_SCENARIO:
            eos_report, what = run_eos_scenario(seed, root)
            failures += special_row(
                name,
                f"counted in {eos_report.took_s:.1f} s, restarts {len(eos_report.restarts)}",
                eos_report.problems,
                [] if eos_report.live else ["the job did not finish in time"],
                what,
            )
            continue
        if name == TXN_SCENARIO:
            txn_report, what = trio.run(run_txn_scenario, seed, root)
            live = txn_report.liveness
            decided = "-" if live.txn_s is None else f"{live.txn_s:.1f}"
            failures += special_row(
                name,
                f"committed {txn_report.committed}, aborted {txn_report.aborted}, unknown {txn_report.unknown}, "
                f"visible {txn_report.records_visible}",
                txn_report.violations(),
                live.violations(),
                f"{what}; {live.summary()}; open transactions decided {decided} s after the producers stopped",
            )
            continue
        report, what = trio.run(run_scenario, name, seed, root)
        print(format_row(name, report, what), flush=True)
        expected_loss = name == "unclean-election"
        if not report.ok and not expected_loss:
            failures += 1
        if report.liveness is not None and not report.liveness.ok:
            failures += 1
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
