"""The share group chaos checker (chaos/share_checker.py) on crafted histories: each invariant is
caught when broken, and a clean history with faults, releases and an archived record passes."""

from chaos.share_checker import check

LIMIT, LOCK = 3, 5.0


def produced(*values, acked=True):
    return [{"type": "produced", "value": v, "acked": acked} for v in values]


def d(member, value, count, t):
    return {"type": "delivered", "member": member, "value": value, "count": count, "t": t}


def a(member, value, kind, t, ok=True, sent=None, code=None):
    answer = {
        "type": "acked",
        "member": member,
        "value": value,
        "kind": kind,
        "ok": ok,
        "t": t,
        "sent": sent or t - 0.01,
    }
    return answer | {"code": code if code is not None or ok else 6}


def acking(member, value, kind, t):
    return {"type": "acking", "member": member, "value": value, "kind": kind, "t": t}


def fault(t):
    return {"type": "fault", "t": t, "what": "killed broker 2"}


def test_a_clean_history_with_a_release_a_reject_a_fault_and_an_archived_record_passes():
    history = produced("x", "y", "z", "w") + [
        d("m1", "x", 1, 1.0),
        a("m1", "x", "release", 1.5),
        d("m2", "x", 2, 1.6),  # after the release: m2 may hold it
        a("m2", "x", "accept", 2.0),
        d("m1", "y", 1, 1.0),
        a("m1", "y", "reject", 1.2),
        d("m1", "z", 1, 1.0),
        fault(1.1),  # m1's leader died: z comes back Available at once
        d("m2", "z", 1, 1.3),  # count kept (the acquisition was not written yet)
        a("m2", "z", "accept", 1.4),
        d("m1", "w", 1, 0.0),
        d("m2", "w", 2, 6.0),  # m1's lock ran out
        d("m3", "w", 3, 12.0),  # and m2's: archived at the limit
    ]
    report = check(history, LIMIT, LOCK)
    assert report.ok, report.violations()
    assert (report.accepted, report.rejected, report.archived) == (2, 1, 1)


def test_an_unresolved_record_is_reported():
    report = check(produced("x") + [d("m1", "x", 1, 1.0), a("m1", "x", "accept", 1.2, ok=False)], LIMIT, LOCK)
    assert report.violations() == {"unresolved": 1}
    assert check(produced("lost"), LIMIT, LOCK).unresolved == [("lost", [])]


def test_a_record_accepted_twice_and_delivered_after_its_accept_are_reported():
    history = produced("x") + [
        d("m1", "x", 1, 1.0),
        a("m1", "x", "accept", 1.2),
        d("m2", "x", 2, 7.0),
        a("m2", "x", "accept", 7.2),
    ]
    report = check(history, LIMIT, LOCK)
    assert report.accepted_twice == [("x", ["m1", "m2"])]
    assert report.delivered_after_done == [("x", "m2", 2)]


def test_two_holders_without_a_fault_or_an_expired_lock_are_reported():
    history = produced("x") + [d("m1", "x", 1, 1.0), d("m2", "x", 2, 2.0), a("m2", "x", "accept", 2.5)]
    report = check(history, LIMIT, LOCK)
    assert report.two_holders == [("x", "m1", "m2")]
    # the lock began when the broker handed the record out, up to PREFETCH_SLACK_S before m1's
    # poll returned it: a delivery to m2 just before m1's delivery + LOCK is excused, one earlier is not
    prefetched = produced("y") + [d("m1", "y", 1, 1.0), d("m2", "y", 2, 1.0 + LOCK - 0.5)]
    assert check(prefetched, LIMIT, LOCK).two_holders == []
    early = produced("z") + [d("m1", "z", 1, 1.0), d("m2", "z", 2, 1.0 + LOCK - 1.5)]
    assert check(early, LIMIT, LOCK).two_holders == [("z", "m1", "m2")]
    failed_release = produced("y") + [
        d("m1", "y", 1, 1.0),
        a("m1", "y", "release", 1.5, ok=False),  # not released: still m1's until its lock runs out
        d("m2", "y", 2, 2.0),
        a("m2", "y", "accept", 2.5),
    ]
    assert check(failed_release, LIMIT, LOCK).two_holders == [("y", "m1", "m2")]


def test_delivery_counts_that_go_down_or_past_the_limit_are_reported():
    down = produced("x") + [d("m1", "x", 2, 1.0), d("m2", "x", 1, 7.0), a("m2", "x", "accept", 7.1)]
    assert check(down, LIMIT, LOCK).count_errors == [("x", [2, 1])]
    past = produced("y") + [d("m1", "y", 4, 1.0), a("m1", "y", "accept", 1.1)]
    assert check(past, LIMIT, LOCK).count_errors == [("y", [4])]


def test_an_acknowledgement_whose_answer_was_lost_resolves_a_record_never_delivered_again():
    history = produced("killed", "broken", "unwritten", "redelivered", "refused", "released") + [
        d("m1", "killed", 1, 1.0),
        acking("m1", "killed", "accept", 1.01),
        fault(1.02),  # m1 killed before the answer: the accept may be durable
        d("m2", "broken", 2, 1.0),
        acking("m2", "broken", "reject", 1.01),
        a("m2", "broken", "reject", 1.5, ok=False, code=-195),  # the connection broke: unknown
        d("m3", "unwritten", 1, 1.0),
        acking("m3", "unwritten", "accept", 1.01),
        a("m3", "unwritten", "accept", 1.5, ok=False, code=13),  # NETWORK_EXCEPTION: the state write may have landed
        d("m1", "redelivered", 1, 1.0),
        acking("m1", "redelivered", "accept", 1.01),
        d("m2", "redelivered", 2, 6.0),  # the accept did not land: it must be resolved again
        d("m2", "refused", 1, 1.0),
        acking("m2", "refused", "accept", 1.01),
        a("m2", "refused", "accept", 1.2, ok=False, code=6),  # NOT_LEADER_OR_FOLLOWER: not durable
        d("m3", "released", 1, 1.0),
        acking("m3", "released", "release", 1.01),  # a release never resolves a record
    ]
    report = check(history, LIMIT, LOCK)
    assert report.unconfirmed == 3
    assert sorted(report.unresolved) == [("redelivered", [1, 2]), ("refused", [1]), ("released", [1])]


def test_a_fault_while_the_first_holder_may_have_prefetched_the_record_excuses_the_overlap():
    # m1's poll returned x at 2.0, but the broker may have acquired it for m1 up to
    # PREFETCH_SLACK_S (1 s) before: a leader change at 1.5 lost that lock
    history = produced("x") + [fault(1.5), d("m1", "x", 1, 2.0), d("m2", "x", 2, 2.5), a("m2", "x", "accept", 2.6)]
    assert check(history, LIMIT, LOCK).two_holders == []
    earlier = produced("y") + [fault(0.5), d("m1", "y", 1, 2.0), d("m2", "y", 2, 2.5), a("m2", "y", "accept", 2.6)]
    assert check(earlier, LIMIT, LOCK).two_holders == [("y", "m1", "m2")]


def test_explain_lists_the_values_events_and_every_fault_in_time_order():
    from chaos.share_checker import explain

    history = produced("x", "y") + [d("m1", "x", 1, 10.0), fault(10.5), d("m2", "x", 2, 11.0), d("m1", "y", 1, 10.2)]
    lines = explain(history, ["x"]).splitlines()
    assert [line.split()[1] for line in lines] == ["delivered", "fault", "delivered"]
    assert lines[0].split()[0] == "0.000" and lines[2].split()[0] == "1.000"
    assert "'y'" not in "".join(lines)


def test_leader_changes_are_read_from_the_brokers_logs_as_faults(tmp_path):
    import time

    from chaos.share_groups import leader_changes

    log_file = tmp_path / "broker.log"
    log_file.write_text(
        "2026-11-29 01:29:03,207 INFO [broker 2] broker.replica_manager: became leader of ('chaos', 2) at epoch 0 "
        "(ISR [1, 2, 3], LEO 0, HW 0)\n"
        "2026-11-29 01:29:17,360 INFO [broker 2] broker.replica_manager: became leader of ('chaos', 1) at epoch 1 "
        "(ISR [1, 2], LEO 622, HW 622)\n"
        "2026-11-29 01:29:17,359 INFO [broker 2] broker.replica_manager: became leader of ('other', 2) at epoch 1 "
        "(ISR [1, 2], LEO 197, HW 196)\n"
    )
    wall = time.mktime(time.strptime("2026-11-29 01:29:17", "%Y-%m-%d %H:%M:%S")) + 0.360
    found = leader_changes([log_file], "chaos", wall_minus_monotonic=wall - 100.0)
    assert [(round(e["t"], 3), e["what"]) for e in found] == [(100.0, "broker 2 became leader of chaos-1 at epoch 1")]
