"""The console's HTML pages, rendered from a `ClusterView` (pure: data in, a page out). Every
value from the cluster is escaped; record keys, values and headers are shown as text only when
they are printable UTF-8, else as hex with their length, so no byte can break the page."""

from __future__ import annotations

import datetime
import html
import urllib.parse
from collections.abc import Iterable

from console.view import ClusterView

STYLE = """
body{font-family:sans-serif;margin:1.2em;color:#222}nav a{margin-right:1em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#eee}.bad{background:#fdd}.warn{background:#ffe9b3}.ok{background:#e6f6e6}.muted{color:#777}
code.bin{color:#835}h1{font-size:1.3em}h2{font-size:1.1em}
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def link(path: str, text) -> str:
    return f'<a href="{esc(path)}">{esc(text)}</a>'


def q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def page(title: str, body: str, view: ClusterView | None = None) -> str:
    serving = f" - broker {view.serving}" if view else ""
    nav = " ".join(
        link(p, t)
        for p, t in (
            ("/", "Cluster"),
            ("/topics", "Topics"),
            ("/groups", "Groups"),
            ("/transactions", "Transactions"),
            ("/clients", "Clients"),
        )
    )
    warn = ""
    if view and view.unreachable:
        gone = ", ".join(f"{b} ({esc(why)})" for b, why in sorted(view.unreachable.items()))
        warn = f'<p class="warn">Not answering: broker {gone}; their replicas show as unknown.</p>'
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{esc(title)} - minikafka</title>'
        f"<style>{STYLE}</style></head><body><nav>{nav}</nav><h1>{esc(title)}{esc(serving)}</h1>{warn}{body}</body></html>"
    )


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], row_classes: Iterable[str] | None = None) -> str:
    """`rows` hold HTML already escaped; `row_classes` one class per row ("" for none)."""
    rows, classes = list(rows), list(row_classes or [])
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        f'<tr class="{classes[i] if i < len(classes) else ""}">' + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
        for i, row in enumerate(rows)
    )
    return f"<table><tr>{head}</tr>{body}</table>" if rows else '<p class="muted">none</p>'


def ids(values) -> str:
    return esc(",".join(str(v) for v in values))


def when(ms: int) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def show_bytes(hex_value: str | None, limit: int = 256) -> str:
    """A key, value or header value (hex, None for null) as safe HTML."""
    if hex_value is None:
        return '<span class="muted">null</span>'
    data = bytes.fromhex(hex_value)
    try:
        text = data.decode("utf-8")
        if all(c.isprintable() or c in "\t\n" for c in text):
            shown = text if len(text) <= limit else text[:limit] + "..."
            return esc(shown)
    except UnicodeDecodeError:
        pass
    shown = data[:limit].hex(" ")
    more = "..." if len(data) > limit else ""
    return f'<code class="bin">{esc(shown)}{more}</code> <span class="muted">({len(data)} bytes, binary)</span>'


# -- views ---------------------------------------------------------------------------------------


def cluster(view: ClusterView) -> str:
    controller = view.controller_id
    rows = [
        [
            esc(b["id"]) + (" (controller)" if b["id"] == controller else ""),
            esc(f"{b['host']}:{b['port']}"),
            esc(b["rack"] or "-"),
            "answering" if b["id"] in view.snapshots else esc(view.unreachable.get(b["id"], "-")),
            esc(sum(1 for p in view.own["partitions"] if p["leader"] == b["id"])),
        ]
        for b in view.brokers
    ]
    offline, under = view.offline(), view.under_replicated()
    topics = view.topics()
    body = (
        f"<p>Controller: broker {esc(controller)}, controller epoch {esc(view.controller_epoch)}. "
        f"{len(topics)} topics, {len(view.own['partitions'])} partitions, "
        f'<span class="{"bad" if offline else "ok"}">{len(offline)} offline</span>, '
        f'<span class="{"warn" if under else "ok"}">{len(under)} under-replicated</span>.</p>'
        "<h2>Brokers</h2>"
        + table(["broker", "endpoint", "rack", "console", "leaderships"], rows)
        + "<h2>Offline partitions</h2>"
        + _partition_list(offline)
        + "<h2>Under-replicated partitions</h2>"
        + _partition_list(under)
    )
    return page("Cluster", body, view)


def _partition_list(parts: list[dict]) -> str:
    return table(
        ["partition", "leader", "replicas", "ISR"],
        [
            [
                link(f"/topics/{q(p['topic'])}", f"{p['topic']}-{p['partition']}"),
                esc(p["leader"]),
                ids(p["replicas"]),
                ids(p["isr"]),
            ]
            for p in parts
        ],
    )


def topics(view: ClusterView) -> str:
    rows, classes = [], []
    for name, parts in sorted(view.topics().items()):
        under = sum(1 for p in parts if len(p["isr"]) < len(p["replicas"]))
        offline = sum(1 for p in parts if p["leader"] < 0)
        rows.append(
            [
                link(f"/topics/{q(name)}", name),
                esc(len(parts)),
                esc(max(len(p["replicas"]) for p in parts)),
                esc(under),
                esc(offline),
            ]
        )
        classes.append("bad" if offline else "warn" if under else "")
    return page(
        "Topics",
        table(["topic", "partitions", "replication factor", "under-replicated", "offline"], rows, classes),
        view,
    )


def topic(view: ClusterView, name: str) -> str:
    parts = view.topics().get(name)
    if not parts:
        return page(f"Topic {name}", "<p>No such topic.</p>", view)
    rows, classes = [], []
    for p in parts:
        replicas = []
        for r in p["replicas"]:
            mine = view.replica(name, p["partition"], r)
            seen = view.follower_as_leader_sees_it(name, p["partition"], r) if r != p["leader"] else None
            role = "leader" if r == p["leader"] else ("in ISR" if r in p["isr"] else "OUT OF ISR")
            if mine is None:
                state = (
                    "unknown (broker not answering)"
                    if r in view.unreachable or r not in view.snapshots
                    else "no replica yet"
                )
            else:
                state = f"LEO {mine['leo']}, HW {mine['hw']}, log start {mine['log_start']}"
            if seen is not None:
                state += f"; leader sees LEO {seen['leo']}, caught up {seen['caught_up_ms_ago']} ms ago"
            replicas.append(f"<b>{esc(r)}</b> ({esc(role)}): {esc(state)}")
        rows.append(
            [
                esc(p["partition"]),
                esc(p["leader"]),
                esc(p["leader_epoch"]),
                ids(p["replicas"]),
                ids(p["isr"]),
                "<br>".join(replicas),
                link(f"/records/{q(name)}/{p['partition']}", "records"),
            ]
        )
        classes.append("bad" if p["leader"] < 0 else "warn" if len(p["isr"]) < len(p["replicas"]) else "")
    body = table(
        ["partition", "leader", "leader epoch", "replicas", "ISR", "replica LEO / HW / log start", ""], rows, classes
    )
    return page(f"Topic {name}", body, view)


def groups(view: ClusterView) -> str:
    rows = [
        [
            link(f"/groups/{q(g['group_id'])}", g["group_id"]),
            esc(g["type"]),
            esc(g["state"]),
            esc(len(g["members"])),
            esc(g["coordinator"]),
            esc(sum(g["lag"].values())),
        ]
        for g in view.groups()
    ]
    return page("Groups", table(["group", "type", "state", "members", "coordinator", "total lag"], rows), view)


def group(view: ClusterView, group_id: str) -> str:
    g = view.group(group_id)
    if g is None:
        return page(f"Group {group_id}", "<p>No such group.</p>", view)
    members = table(
        ["member", "client id", "host", "assignment"],
        [
            [
                esc(m["member_id"]),
                esc(m["client_id"]),
                esc(m["host"]),
                esc("; ".join(f"{t}: {','.join(map(str, ps))}" for t, ps in sorted(m["assignment"].items())) or "-"),
            ]
            for m in g["members"]
        ],
    )
    offsets = table(
        ["partition", "committed offset", "high watermark", "lag"],
        [
            [
                link(f"/topics/{q(t)}", f"{t}-{p}"),
                esc(o),
                esc(hw if (hw := view.high_watermark(t, p)) is not None else "unknown"),
                esc(g["lag"].get((t, p), "unknown")),
            ]
            for t, p, o in g["committed"]
        ]
        + [
            [link(f"/topics/{q(t)}", f"{t}-{p}"), "-", esc(view.high_watermark(t, p)), "-"]
            for t, p in sorted(_assigned(g) - {(t, p) for t, p, _ in g["committed"]})
        ],
    )
    if g["type"] == "share":
        offsets_title, offsets = "Share-partitions (as their leaders hold them)", _share_partitions(view, group_id)
    else:
        offsets_title = "Committed offsets and lag"
    body = (
        f"<p>Type {esc(g['type'])}, state <b>{esc(g['state'])}</b>, protocol {esc(g['protocol'] or '-')}, "
        f"coordinator broker {esc(g['coordinator'])}.</p><h2>Members</h2>{members}<h2>{offsets_title}</h2>{offsets}"
    )
    return page(f"Group {group_id}", body, view)


def _share_partitions(view: ClusterView, group_id: str) -> str:
    """Per share-partition (KIP-932): its leader, the start and end offsets (SPSO, SPEO), the
    in-flight records by state, the lowest and highest delivery count among them, and the lag."""
    states = ("Available", "Acquired", "Acknowledged", "Archived")
    rows = []
    for sp in view.share_partitions(group_id):
        low, high = sp["delivery_counts"]
        rows.append(
            [
                link(f"/topics/{q(sp['topic'])}", f"{sp['topic']}-{sp['partition']}"),
                esc(sp["leader"]),
                esc(sp["start_offset"]),
                esc(sp["end_offset"]),
                *(esc(sp["records"].get(state, 0)) for state in states),
                esc(f"{low}-{high}" if high else "-"),
                esc(sp["lag"]),
            ]
        )
    headers = ["partition", "leader", "start offset (SPSO)", "end offset (SPEO)", *(s.lower() for s in states)]
    if not rows:
        return "<p>No leader holds a share-partition of this group now (none read since a leader started).</p>"
    return table([*headers, "delivery counts", "lag"], rows)


def _assigned(g: dict) -> set[tuple[str, int]]:
    return {(t, p) for m in g["members"] for t, ps in m["assignment"].items() for p in ps}


def transactions(view: ClusterView) -> str:
    rows = [
        [
            esc(t["transactional_id"]),
            esc(t["producer_id"]),
            esc(t["producer_epoch"]),
            esc(t["state"]),
            esc(t["timeout_ms"]),
            esc(when(t["started_ms"])),
            esc(", ".join(f"{tp}-{p}" for tp, p in t["partitions"]) or "-"),
            esc(t["coordinator"]),
        ]
        for t in view.transactions()
    ]
    headers = [
        "transactional id",
        "producer id",
        "epoch",
        "state",
        "timeout ms",
        "started",
        "partitions",
        "coordinator",
    ]
    return page("Transactions", table(headers, rows), view)


def records(view: ClusterView, topic_name: str, partition: int, answer: dict, offset: int, limit: int) -> str:
    title = f"Records of {topic_name}-{partition}"
    if "error" in answer:
        return page(title, f'<p class="bad">{esc(answer["error"])}</p>', view)
    rows = [
        [
            esc(r["offset"]),
            esc(when(r["timestamp"])),
            show_bytes(r["key"]),
            show_bytes(r["value"]),
            "<br>".join(f"{esc(k)}: {show_bytes(v)}" for k, v in r["headers"]) or "-",
        ]
        for r in answer["records"]
    ]
    base = f"/records/{q(topic_name)}/{partition}"
    nav = []
    if offset > answer["log_start"]:
        nav.append(link(f"{base}?offset={max(answer['log_start'], offset - limit)}&limit={limit}", "previous"))
    if answer["records"] and answer["records"][-1]["offset"] + 1 < answer["hw"]:
        nav.append(link(f"{base}?offset={answer['records'][-1]['offset'] + 1}&limit={limit}", "next"))
    body = (
        f"<p>Log start offset {esc(answer['log_start'])}, high watermark {esc(answer['hw'])} "
        f"(committed records only), from offset {esc(offset)}. {link(f'/topics/{q(topic_name)}', 'topic')}</p>"
        + (f'<p class="warn">{esc(answer["note"])}</p>' if answer.get("note") else "")
        + table(["offset", "timestamp", "key", "value", "headers"], rows)
        + f"<p>{' | '.join(nav)}</p>"
    )
    return page(title, body, view)
