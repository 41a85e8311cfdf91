"""The transactional chaos checker on hand-made histories: each anomaly is flagged, a clean history
passes."""

from chaos.txn_checker import check_transactions


def history(*events):
    return [dict(e) for e in events]


def begin(txn, n):
    return {"op": "txn_begin", "txn": txn, "n": n}


def end(txn, outcome):
    return {"op": "txn_end", "txn": txn, "outcome": outcome}


def lso(p, offset):
    return {"op": "lso", "partition": p, "offset": offset}


CLEAN = history(begin("a", 2), end("a", "committed"), begin("b", 2), end("b", "aborted"), begin("c", 1), lso(0, 3))


def test_a_clean_history_passes():
    report = check_transactions(CLEAN, {"a:0": 1, "a:1": 1, "c:0": 1})  # c unknown, fully visible
    assert report.ok and (report.committed, report.aborted, report.unknown) == (1, 1, 1)
    assert check_transactions(CLEAN, {"a:0": 1, "a:1": 1}).ok  # c unknown, invisible


def test_each_anomaly_is_flagged():
    assert check_transactions(CLEAN, {"a:0": 1}).violations() == {"committed transactions missing": 1}
    assert check_transactions(CLEAN, {"a:0": 1, "a:1": 1, "b:0": 1}).violations() == {
        "aborted records visible": 1,
        "partial transactions": 1,
    }
    assert check_transactions(CLEAN, {"a:0": 2, "a:1": 1}).violations() == {"duplicated records": 1}
    partial = history(begin("u", 3))
    assert check_transactions(partial, {"u:0": 1}).violations() == {"partial transactions": 1}
    backwards = CLEAN + history(lso(0, 2), lso(1, 5))
    assert check_transactions(backwards, {"a:0": 1, "a:1": 1}).lso_backwards == [(0, 3, 2)]
