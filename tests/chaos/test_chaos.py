"""The chaos scenarios (chaos/runner.py) as part of `make test`: each runs a real 3-broker cluster
under load while its nemesis strikes, and the checker judges the history (safety) and the cluster
after the heal (liveness: chaos/liveness.py). The seed is printed;
CHAOS_SEED=<seed> reproduces a run.

How long each workload runs, and why (issue 48):
- `test_scenario`: 2 s of workload before the fault and `WORKLOAD_S` (6 s) from the fault on. The
  chaos brokers run a 4 s ZooKeeper session and a 2 s `replica.lag.time.max.ms`, so within 6 s a
  killed, paused or cut-off broker's session ends, its partitions get new leaders and the ISRs
  shrink: the writes span the failover, which is what the checker judges (`make chaos`: 12 s).
- `test_transactional_scenario`, `test_analysis_scenario`: 3 s before the fault; the nemesis
  kills and restarts brokers in sequence (coordinator, leader, both; or a broker, then the
  controller), each down 2-4 s and followed by 3 s of workload; then 9 s more (2 x `WORKLOAD_S`
  - 3 s), so transactions run across every restart.
- `test_late_write_scenario`: HOLD_S + OBSERVE_S (about 40 s, chaos/late_write.py): the held
  Produce is released past its transaction's timeout and the workload runs past the stuck-LSO
  bound (`transaction.timeout.ms` + 15 s), which the check needs to see pass.
- `test_share_group_scenario`: members read for `WORKLOAD_S` + 14 s while the nemesis kills a
  leader, the share coordinator and a member (chaos/share_groups.py).
After each, the liveness bounds of chaos/liveness.py (a leader for every partition within 30 s,
full ISRs within 60 s, admin requests answered within 30 s) and 60 s for producers to finish
bound the rest."""

import os
import random

import pytest
import trio

from chaos.runner import GROUP_SCENARIOS, SCENARIOS, iptables_works, run_scenario, tmpfs_works

pytestmark = pytest.mark.slow  # starts ZooKeeper, brokers, clients or other processes

SEED = int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30)))
WORKLOAD_S = 6.0  # seconds of workload from the fault on (`make chaos` runs 12 s, the transactional one 20 s)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name, tmp_path):
    if name == "partition-broker" and not iptables_works():
        pytest.skip("iptables does not work here (needs root and CAP_NET_ADMIN)")
    if name == "disk-full" and not tmpfs_works(tmp_path):
        pytest.skip("a tmpfs cannot be mounted here (needs root)")
    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_scenario, name, SEED, tmp_path, WORKLOAD_S)
    print(
        f"{name}: {what}; sent {report.attempted}, acked {report.acked}, failed {report.failed}, "
        f"lost {len(report.lost)}, duplicated {len(report.duplicated)}, "
        f"longest without a leader {report.max_leaderless_s:.1f} s, group reads {report.group_reads}, "
        f"violations {report.violations()}, liveness: {report.liveness.summary()} {report.liveness.violations()}"
    )
    assert report.liveness.ok, report.liveness.violations()  # every scenario heals, unclean elections too
    assert report.acked > 500, "the workload made too little progress to judge"
    if name in GROUP_SCENARIOS:
        assert report.group_reads >= report.acked, "the group did not read everything: nothing to judge"
    if name.endswith("-mixed-protocols"):
        assert report.mixed_group, "the group never held a classic and a consumer member at once"
    if name == "unclean-election":
        # data loss is allowed here, but it must be reported, never a silent divergence
        assert not report.divergent and not report.reordered
    else:
        assert report.ok, report.violations()


def test_transactional_scenario(tmp_path):
    """Transactions under coordinator and leader kills (chaos/transactions.py): atomic, no aborted
    record visible, no committed one lost, no duplicate, the LSO never going backwards."""
    from chaos.transactions import NAME, run_txn_scenario

    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_txn_scenario, SEED, tmp_path, 2 * WORKLOAD_S)
    print(
        f"{NAME}: {what}; committed {report.committed}, aborted {report.aborted}, unknown {report.unknown}, "
        f"records visible {report.records_visible}, violations {report.violations()}"
    )
    print(f"liveness: {report.liveness.summary()}, open transactions decided in {report.liveness.txn_s} s")
    assert report.liveness.ok, report.liveness.violations()
    assert report.committed > 50 and report.aborted > 5, "the workload made too little progress to judge"
    assert report.ok, report.violations()


def test_analysis_scenario(tmp_path):
    """The analysis-style mixed workload (chaos/analysis.py): every anomaly class counted, all zero,
    with aborted transactions among the committed ones, and the cluster live after the heal."""
    from chaos.analysis import run_analysis_scenario

    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_analysis_scenario, SEED, tmp_path, 2 * WORKLOAD_S)
    print(f"{what}; transactions {report.transactions}, acknowledged {report.acknowledged}: {report.line()}")
    assert report.acknowledged > 500 and report.transactions.get("abort", 0) > 5, "too little to judge"
    assert report.ok, (report.line(), report.examples)
    assert report.liveness.ok, report.liveness.violations()


@pytest.mark.parametrize("verification", [True, False], ids=["verification-on", "verification-off"])
def test_late_write_scenario(verification, tmp_path):
    """A transactional Produce held in a TCP proxy past its transaction's abort (chaos/late_write.py):
    with KIP-890 verification every anomaly class counts 0; without it the late write is reported
    as a stuck LSO (the check can fail), find_hanging lists it and abort_transaction ends it."""
    from chaos.late_write import run_late_write_scenario

    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_late_write_scenario, SEED, tmp_path, verification)
    a = report.analysis
    print(f"{what}; transactions {a.transactions}, acknowledged {a.acknowledged}: {a.line()}; {a.examples}")
    print(f"producer errors: {report.errors}")
    assert report.held, "the proxy never caught the late producer's Produce"
    assert a.acknowledged > 50 and a.transactions.get("abort", 0) >= 1, "too little to judge"
    assert report.ok, (a.line(), a.examples, report.hanging_found, report.hanging_left)


def test_share_group_scenario(tmp_path):
    """Share groups (chaos/share_groups.py) under a leader kill, a share coordinator kill and a
    member kill: every record accepted once or archived, none delivered after its acknowledgement,
    never two holders without a fault or an expired lock, delivery counts never decreasing."""
    import json

    from chaos.share_checker import explain
    from chaos.share_groups import NAME, run_share_scenario, summary

    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = trio.run(run_share_scenario, SEED, tmp_path, WORKLOAD_S)
    print(f"{NAME}: {what}; {summary(report)}")
    if not report.ok:  # the failing values' events and every fault, read without the run's files
        s = report.share
        values = [v for v, *_ in s.two_holders + s.unresolved + s.accepted_twice + s.delivered_after_done]
        history = [json.loads(line) for line in (tmp_path / NAME / "history.jsonl").read_text().splitlines()]
        print(explain(history, values))
    assert report.share.produced > 500 and report.share.accepted > 500, "too little to judge"
    assert report.ok, (report.violations(), report.share.unresolved[:5], report.share.two_holders[:5])
