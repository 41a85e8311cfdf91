"""The analysis-style anomaly checker (chaos/analysis_checker.py), table-driven: a clean history
counts zero in every class, and each anomaly, planted alone, is counted in its class only."""

import pytest

from chaos.analysis_checker import CLASSES, check


def clean() -> list[dict]:
    """Plain p1 at 0-0, a committed transaction (t1, t2 at 0-1, 0-2), an aborted one (a1 at 1-0,
    its marker at 1-1), plain p2 at 1-2; both consumers polled everything."""
    h = [
        {"op": "send", "value": "p1", "partition": 0, "txn": None},
        {"op": "delivered", "value": "p1", "partition": 0, "offset": 0},
        {"op": "send", "value": "t1", "partition": 0, "txn": 1},
        {"op": "send", "value": "t2", "partition": 0, "txn": 1},
        {"op": "delivered", "value": "t1", "partition": 0, "offset": 1},
        {"op": "delivered", "value": "t2", "partition": 0, "offset": 2},
        {"op": "txn", "txn": 1, "outcome": "commit"},
        {"op": "send", "value": "a1", "partition": 1, "txn": 2},
        {"op": "delivered", "value": "a1", "partition": 1, "offset": 0},
        {"op": "txn", "txn": 2, "outcome": "abort"},
        {"op": "send", "value": "p2", "partition": 1, "txn": None},
        {"op": "delivered", "value": "p2", "partition": 1, "offset": 2},
    ]
    for consumer in ("assign", "subscribe"):
        h.append({"op": "assign", "consumer": consumer})
        for p, o, v in ((0, 0, "p1"), (0, 1, "t1"), (0, 2, "t2"), (1, 2, "p2")):
            h.append({"op": "poll", "consumer": consumer, "partition": p, "offset": o, "value": v})
    for p, o, v in ((0, 0, "p1"), (0, 1, "t1"), (0, 2, "t2"), (1, 2, "p2")):
        h.append({"op": "final", "partition": p, "offset": o, "value": v})
    return h


def without(h, **match):
    return [e for e in h if not all(e.get(k) == v for k, v in match.items())]


def test_a_clean_history_counts_zero_in_every_class():
    report = check(clean())
    assert report.ok and set(report.counts) == set(CLASSES) and report.acknowledged == 4
    assert report.line().startswith("lost write 0, unseen write 0, duplicate 0")


CASES = {
    "lost write": lambda h: without(h, op="final", value="t2"),
    "unseen write": lambda h: without(h, op="poll", value="p2"),
    "duplicate": lambda h: h + [{"op": "final", "partition": 1, "offset": 3, "value": "p1"}],
    "poll skip": lambda h: without(h, op="poll", consumer="assign", value="t1"),
    "non-monotonic poll": lambda h: (
        h + [{"op": "poll", "consumer": "subscribe", "partition": 0, "offset": 2, "value": "t2"}]
    ),
    "aborted read": lambda h: h + [{"op": "poll", "consumer": "assign", "partition": 1, "offset": 0, "value": "a1"}],
    "inconsistent offsets": lambda h: h + [{"op": "final", "partition": 0, "offset": 0, "value": "zz"}],
    "internal send skip": lambda h: [
        dict(e, offset=2)
        if e.get("value") == "t1" and e["op"] == "delivered"
        else dict(e, offset=1)
        if e.get("value") == "t2" and e["op"] == "delivered"
        else e
        for e in h
    ],
    # t2 of the committed transaction is in no final read but t1 is
    "torn transaction": lambda h: without(h, op="final", value="t2"),
    # partition 1's LSO held at 0 below its HW 3 for 50 s, past a 45 s bound
    "stuck LSO": lambda h: (
        h
        + [{"op": "bound", "lso_s": 45.0}]
        + [{"op": "offsets", "partition": 1, "hw": 3, "lso": 0, "at_s": float(t)} for t in range(0, 51, 5)]
    ),
}


def test_an_lso_that_moves_or_catches_up_within_the_bound_is_not_stuck():
    h = clean() + [{"op": "bound", "lso_s": 45.0}]
    h += [{"op": "offsets", "partition": 1, "hw": 3, "lso": 0, "at_s": float(t)} for t in range(0, 41, 5)]
    h += [{"op": "offsets", "partition": 1, "hw": 3, "lso": 3, "at_s": 45.0}]  # caught up: an abort's marker
    h += [{"op": "offsets", "partition": 1, "hw": 5, "lso": 3, "at_s": float(t)} for t in range(50, 86, 5)]
    h += [{"op": "offsets", "partition": 1, "hw": 9, "lso": 5, "at_s": float(t)} for t in range(90, 131, 5)]
    assert check(h).counts["stuck LSO"] == 0
    h += [{"op": "offsets", "partition": 1, "hw": 9, "lso": 5, "at_s": 140.0}]  # 5 held for 50 s
    assert check(h).counts["stuck LSO"] == 1


@pytest.mark.parametrize("cls", list(CASES))
def test_each_anomaly_is_counted_in_its_class(cls):
    report = check(CASES[cls](clean()))
    assert report.counts[cls] >= 1, report.line()
    if cls not in (
        "aborted read",
        "duplicate",
        "inconsistent offsets",
        "internal send skip",
        "poll skip",
        "lost write",
        "torn transaction",
    ):
        others = {c: n for c, n in report.counts.items() if c != cls and n}
        assert not others, others
