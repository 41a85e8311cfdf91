"""The chaos checker on hand-made histories with known anomalies: it must flag each one, and pass a
clean history."""

from chaos.checker import check


def clean():
    history = [
        {"t": 0.0, "op": "send", "producer": "a", "partition": 0, "value": b"1"},
        {"t": 0.1, "op": "ack", "producer": "a", "partition": 0, "value": b"1", "offset": 0},
        {"t": 0.2, "op": "send", "producer": "a", "partition": 0, "value": b"2"},
        {"t": 0.3, "op": "ack", "producer": "a", "partition": 0, "value": b"2", "offset": 1},
        {"t": 0.4, "op": "hw", "consumer": "c", "partition": 0, "hw": 2},
        {"t": 0.5, "op": "read", "consumer": "c", "partition": 0, "offset": 0, "value": b"1"},
        {"t": 1.0, "op": "leader", "partition": 0, "leader": -1},
        {"t": 3.5, "op": "leader", "partition": 0, "leader": 2},
    ]
    log = [(0, b"1"), (1, b"2")]
    replicas = {0: {1: list(log), 2: list(log), 3: list(log)}}
    return history, replicas, {0: 2}, {0: [1, 2, 3]}, {0: 2}


def test_a_clean_history_passes_and_reports_the_leaderless_window():
    report = check(*clean(), in_order=True)
    assert report.ok and report.violations() == {}
    assert (report.attempted, report.acked, report.failed) == (2, 2, 0)
    assert report.max_leaderless_s == 2.5


def test_a_lost_write_is_flagged():
    history, replicas, leaders, isr, hws = clean()
    for broker in replicas[0]:
        replicas[0][broker] = [(0, b"1")]  # the acknowledged offset 1 is gone everywhere
    report = check(history, replicas, leaders, isr, {0: 1}, in_order=True)
    assert report.lost == [(0, 1, b"2")] and not report.ok


def test_a_divergent_replica_is_flagged():
    history, replicas, leaders, isr, hws = clean()
    replicas[0][3] = [(0, b"1"), (1, b"X")]
    report = check(history, replicas, leaders, isr, hws, in_order=True)
    assert report.divergent == [(0, 3, 1)] and not report.ok


def test_an_acknowledged_record_replaced_at_its_offset_is_lost():
    history, replicas, leaders, isr, hws = clean()
    for broker in replicas[0]:
        replicas[0][broker] = [(0, b"1"), (1, b"other")]
    report = check(history, replicas, leaders, isr, hws, in_order=True)
    assert report.lost == [(0, 1, b"2")]


def test_offset_reuse_is_flagged():
    history, replicas, leaders, isr, hws = clean()
    history.append({"t": 0.6, "op": "read", "consumer": "c", "partition": 0, "offset": 1, "value": b"old"})
    report = check(history, replicas, leaders, isr, hws, in_order=True)
    assert report.unstable == [(0, 1, b"old", b"2")] and not report.ok


def test_a_high_watermark_going_backwards_is_flagged():
    history, replicas, leaders, isr, hws = clean()
    history.append({"t": 0.7, "op": "hw", "consumer": "c", "partition": 0, "hw": 1})
    report = check(history, replicas, leaders, isr, hws, in_order=True)
    assert report.hw_regressions == [("c", 0, 2, 1)]


def test_reordering_is_flagged_when_one_request_was_in_flight():
    history = [e for e in clean()[0] if e["op"] == "send"]  # no acks: nothing lost, only order
    replicas = {0: {b: [(0, b"2"), (1, b"1")] for b in (1, 2, 3)}}
    report = check(history, replicas, {0: 2}, {0: [1, 2, 3]}, {0: 2}, in_order=True)
    assert report.reordered == [("a", 0, b"2")] and not report.ok
    assert not check(history, replicas, {0: 2}, {0: [1, 2, 3]}, {0: 2}, in_order=False).reordered


def test_duplicates_are_reported():
    history, replicas, leaders, isr, hws = clean()
    for broker in replicas[0]:
        replicas[0][broker] = [(0, b"1"), (1, b"2"), (2, b"2")]
    report = check(history, replicas, leaders, isr, {0: 3}, in_order=True)
    assert report.duplicated == [(0, b"2")] and report.ok  # reported, not a violation


def with_group(reads, committed):
    history, replicas, leaders, isr, hws = clean()
    history += [
        {"t": 2.0, "op": "gread", "consumer": "g1", "partition": 0, "offset": o, "value": b"12"[o : o + 1]}
        for o in reads
    ]
    history += [{"t": 2.5 + i / 10, "op": "committed", "partition": 0, "offset": o} for i, o in enumerate(committed)]
    return check(history, replicas, leaders, isr, hws, in_order=True)


def test_a_group_that_read_and_committed_everything_passes():
    report = with_group([0, 1, 1], [1, 2])
    assert report.ok and report.group_reads == 3


def test_an_acknowledged_record_the_group_never_read_is_flagged():
    report = with_group([0], [1])
    assert report.unconsumed == [(0, 1)] and not report.ok


def test_a_committed_offset_going_backwards_is_flagged():
    report = with_group([0, 1], [2, 1, 2])
    assert report.commit_regressions == [(0, 2, 1)] and not report.ok


def test_a_record_skipped_below_a_commit_is_flagged():
    report = with_group([1], [2])
    assert report.skipped == [(0, 0)] and report.unconsumed == [(0, 0)]
