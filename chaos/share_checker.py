"""The share group chaos checker (KIP-932): a pure function over a scenario's history.

History events (dicts; `t` seconds on one monotonic clock, the scenario's):
- {"type": "produced", "value", "acked": bool}: the producer's outcome for one record;
- {"type": "delivered", "member", "value", "count", "t"}: a member received the record with
  that delivery count (acquired until its acknowledgement or its lock's end);
- {"type": "acking", "member", "value", "kind", "t"}: the member acknowledged the record (the
  answer may never come: the member may be killed first);
- {"type": "acked", "member", "value", "kind": "accept" | "release" | "reject", "ok": bool, "t",
  "sent", "code"}: the broker's answer (at `t`) to the member's acknowledgement sent at `sent` (ok:
  durable, as the acknowledgement commit callback reports it; `code` the error's, negative for
  the client's own, such as a broken connection);
- {"type": "fault", "t", "what"}: the nemesis struck (a leader, a share coordinator or a member
  killed), or a partition of the topic got a new leader: locks may be lost then, and records
  come back Available with their counts kept.

What holds (`ShareReport.violations()`):
- **resolved**: every record the producer saw acknowledged ends accepted (an ok accept) by
  exactly one delivery, or archived: rejected (an ok reject) or delivered `delivery_limit` times
  without an accept, or its last delivery's accept or reject has an unknown outcome (never
  answered, or answered with a broken connection or a timeout: the broker may have made it
  durable before, as a produce request that times out may have been written) and the record is
  never delivered again (`unconfirmed`);
- **accepted once**: no record has two ok accepts;
- **never again**: no record is delivered after an ok accept or reject of it;
- **one holder**: no record is delivered to a member while another holds it (delivered to it
  less than the lock duration before, not released by it) unless a fault came in between;
- **counts**: a record's delivery counts never decrease, and never pass the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ShareReport:
    produced: int = 0
    delivered: int = 0
    accepted: int = 0
    rejected: int = 0
    archived: int = 0  # at the delivery limit without an accept
    unconfirmed: int = 0  # done by an acknowledgement whose answer was lost (see `_unknown_outcome`)
    unresolved: list = field(default_factory=list)
    accepted_twice: list = field(default_factory=list)
    delivered_after_done: list = field(default_factory=list)
    two_holders: list = field(default_factory=list)
    count_errors: list = field(default_factory=list)

    def violations(self) -> dict[str, int]:
        found = {
            "unresolved": len(self.unresolved),
            "accepted twice": len(self.accepted_twice),
            "delivered after done": len(self.delivered_after_done),
            "two holders": len(self.two_holders),
            "delivery counts": len(self.count_errors),
        }
        return {k: v for k, v in found.items() if v}

    @property
    def ok(self) -> bool:
        return not self.violations()


def check(history: list[dict], delivery_limit: int, lock_s: float) -> ShareReport:
    report = ShareReport()
    events = sorted((e for e in history if "t" in e), key=lambda e: e["t"])
    faults = [e["t"] for e in events if e["type"] == "fault"]
    produced = [e["value"] for e in history if e["type"] == "produced" and e["acked"]]
    report.produced = len(produced)
    by_value: dict[str, list[dict]] = {}
    for e in events:
        if e["type"] in ("delivered", "acking", "acked"):
            by_value.setdefault(e["value"], []).append(e)
    for value in produced:
        _judge(report, value, by_value.get(value, []), faults, delivery_limit, lock_s)
    for value, evs in by_value.items():
        if value not in produced:  # delivered though its send failed (it may have been written): judged too
            _judge(report, value, evs, faults, delivery_limit, lock_s, required=False)
    return report


def _judge(
    report: ShareReport,
    value: str,
    events: list[dict],
    faults: list[float],
    limit: int,
    lock_s: float,
    required: bool = True,
) -> None:
    deliveries = [e for e in events if e["type"] == "delivered"]
    report.delivered += len(deliveries)
    accepts = [e for e in events if e["type"] == "acked" and e["ok"] and e["kind"] == "accept"]
    rejects = [e for e in events if e["type"] == "acked" and e["ok"] and e["kind"] == "reject"]
    if len(accepts) > 1:
        report.accepted_twice.append((value, [a["member"] for a in accepts]))
    done = min((e["t"] for e in accepts + rejects), default=None)
    if done is not None:
        late = [d for d in deliveries if d["t"] > done]
        if late:
            report.delivered_after_done.append((value, late[0]["member"], late[0]["count"]))
    counts = [d["count"] for d in deliveries]
    if any(b < a for a, b in zip(counts, counts[1:], strict=False)) or any(c > limit or c < 1 for c in counts):
        report.count_errors.append((value, counts))
    _holders(report, value, events, faults, lock_s)
    if accepts:
        report.accepted += 1
    elif rejects:
        report.rejected += 1
    elif counts and max(counts) >= limit:
        report.archived += 1
    elif deliveries and _unknown_outcome(events, deliveries[-1]):
        report.unconfirmed += 1
    elif required:
        report.unresolved.append((value, counts))


#: answers that leave an acknowledgement's outcome unknown: librdkafka's own errors (negative:
#: a broken connection, a local timeout), REQUEST_TIMED_OUT, and NETWORK_EXCEPTION (the leader
#: lost its share coordinator's connection during the state write, which may have landed)
UNKNOWN_OUTCOME_CODES = (7, 13)
#: how long before a member's poll returned a record the broker may have acquired it for that
#: member (librdkafka fetches ahead of the application): the lock runs from then
PREFETCH_SLACK_S = 1.0


def _unknown_outcome(events: list[dict], last: dict) -> bool:
    """Whether the member of the record's `last` delivery accepted or rejected it and never
    learned whether that was durable."""
    after = [e for e in events if e["t"] >= last["t"] and e.get("member") == last["member"] and e is not last]
    acking = next((e for e in after if e["type"] == "acking"), None)
    if acking is None or acking["kind"] not in ("accept", "reject"):
        return False
    answer = next((e for e in after if e["type"] == "acked"), None)
    if answer is None:
        return True
    code = answer.get("code")
    return not answer["ok"] and code is not None and (code < 0 or code in UNKNOWN_OUTCOME_CODES)


def _holders(report: ShareReport, value: str, events: list[dict], faults: list[float], lock_s: float) -> None:
    """A delivery while another member holds the record. A member holds it from its delivery
    until it sent an acknowledgement the broker answered ok (`sent`), or until the lock ran out
    (at the latest `lock_s` after the delivery, at the earliest `PREFETCH_SLACK_S` sooner: the
    lock started when the broker handed the record out, before the poll returned it); an
    overlap is excused when a fault came between the two (from when the first member's record
    may have been acquired, `PREFETCH_SLACK_S` before its poll returned it)."""
    holds = []  # (member, since, until)
    for i, e in enumerate(events):
        if e["type"] != "delivered":
            continue
        until = e["t"] - PREFETCH_SLACK_S + lock_s
        for later in events[i + 1 :]:
            if later["type"] == "acked" and later["member"] == e["member"] and later["ok"]:
                until = min(until, later.get("sent", later["t"]))
                break
            if later["type"] == "delivered" and later["member"] == e["member"]:
                break  # delivered to it again: this hold ended before (released, or its lock ran out)
        holds.append((e["member"], e["t"], until))
    for i, (member, since, until) in enumerate(holds):
        for other, other_since, _ in holds[i + 1 :]:
            if other != member and since <= other_since < until:
                if not any(since - PREFETCH_SLACK_S <= f <= other_since for f in faults):
                    report.two_holders.append((value, member, other))


def explain(history: list[dict], values: list[str], limit: int = 3) -> str:
    """The events of the first `limit` of `values` and every fault, one per line, in time order,
    times in seconds from the history's first event: what a failing run prints so its cause can
    be read without the run's files."""
    events = sorted((e for e in history if "t" in e), key=lambda e: e["t"])
    if not events:
        return "(no events)"
    start = events[0]["t"]
    wanted = set(values[:limit])
    lines = []
    for e in events:
        if e["type"] == "fault" or e.get("value") in wanted:
            fields = {k: v for k, v in e.items() if k not in ("t", "type", "sent")}
            if "sent" in e:
                fields["sent"] = f"{e['sent'] - start:.3f}"
            lines.append(f"{e['t'] - start:9.3f} {e['type']:<9} {fields}")
    return "\n".join(lines)
