"""Turns a cluster bench run (the dict `bench/cluster_bench.py` writes as JSON) into a markdown
report with the issue's targets judged, a PNG chart, and docs/benchmarks.md's `bench:cluster` section."""

from __future__ import annotations

import re
from pathlib import Path

README_START = "<!-- bench:cluster:start -->"
README_END = "<!-- bench:cluster:end -->"


def _f(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def targets(data: dict) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for the issue's targets; met is None when not measured."""
    rows = {(r["case"], r["client"]): r for r in data["rows"]}
    scale = {p["partitions"]: p for p in data["scaling"]}
    out = []

    def get(case, client="confluent"):
        return rows.get((case, client))

    r = get("RF 1 acks=1, 100 B, 1 partition")
    if r:
        out.append(
            (
                "RF 1, acks=1, 100 B, confluent: >= 50% of the ceiling (MB/s)",
                f"{r['mb_per_s']:.1f} MB/s = {100 * r['ratio']:.0f}%",
                r["ratio"] >= 0.5,
            )
        )
    best = max(
        (x for x in (get("RF 3 acks=all, 100 B, 1 partition"), get("RF 3 acks=all, 100 B, 6 partitions")) if x),
        key=lambda x: x["records_per_s"],
        default=None,
    )
    if best:
        out.append(
            (
                "RF 3, acks=all, 100 B, confluent: >= 300k records/s",
                f"{best['records_per_s']:,.0f} records/s",
                best["records_per_s"] >= 300_000,
            )
        )
    r = get("consume, 100 B, 1 partition (RF 1)")
    if r:
        out.append(
            (
                "consume, 100 B, one partition: >= 1M records/s",
                f"{r['records_per_s']:,.0f} records/s (confluent)"
                + (
                    f", {get('consume, 100 B, 1 partition (RF 1)', 'ours')['records_per_s']:,.0f} (ours)"
                    if get("consume, 100 B, 1 partition (RF 1)", "ours")
                    else ""
                ),
                max(r["records_per_s"], (get("consume, 100 B, 1 partition (RF 1)", "ours") or r)["records_per_s"])
                >= 1_000_000,
            )
        )
    r = get("produce latency at 10k records/s, RF 3 acks=all")
    if r:
        out.append(("produce p99 at acks=all, 10k records/s: <= 10 ms", f"{r['p99_ms']:.2f} ms", r["p99_ms"] <= 10))
    six = get("RF 3 acks=1, 100 B, 6 partitions")
    if 1000 in scale and six:
        ratio = six["records_per_s"] / scale[1000]["records_per_s"]
        out.append(
            (
                "1000 partitions: throughput within 2x of 6 partitions",
                f"{scale[1000]['records_per_s']:,.0f} vs {six['records_per_s']:,.0f} records/s ({ratio:.2f}x)",
                ratio <= 2,
            )
        )
    if 1000 in scale:
        p = scale[1000]
        out.append(
            (
                "1000 partitions: idle broker RSS grows < 200 KB per partition",
                f"{p['rss_kb_per_partition']:.0f} KB",
                p["rss_kb_per_partition"] < 200,
            )
        )
        out.append(("1000 partitions: controller failover < 5 s", f"{p['failover_s']:.2f} s", p["failover_s"] < 5))
    # issue 15: validating every record of a client batch may cost at most 25% of the throughput
    # of the last build that only walked the record framing (bench run of 2026-11-23, e442730)
    for size, baseline in (("100 B", 420_984), ("1024 B", 86_275)):
        r = get(f"RF 3 acks=all, {size}, 1 partition")
        if r:
            out.append(
                (
                    f"issue 15: RF 3 acks=all, {size}, full record validation: >= 75% of "
                    f"{baseline:,} records/s (framing walk only)",
                    f"{r['records_per_s']:,.0f} records/s ({r['records_per_s'] / baseline:.0%})",
                    r["records_per_s"] >= 0.75 * baseline,
                )
            )
    return out


def markdown(data: dict) -> str:
    lines = [
        f"Cluster bench ({data['when']}{', --quick: sizes too small to mean anything' if data['quick'] else ''}): "
        "ZooKeeper and 3 brokers on this 2-core machine; load from `minikafka perf` (confluent-kafka unless "
        "the client column says ours). Ceiling: a trio server that appends 16 KiB frames to a file and acks, "
        f"8 in flight: **{data['ceiling_mb_s']:.1f} MB/s**.",
        "",
        "| case | client | records/s | MB/s | / ceiling | p50 ms | p99 ms | client CPU | brokers CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        errors = f" ({r['errors']} errors)" if r["errors"] else ""
        lines.append(
            f"| {r['case']}{errors} | {r['client']} | {r['records_per_s']:,.0f} | {r['mb_per_s']:.1f} | "
            f"{r['ratio']:.2f} | {_f(r['p50_ms'], '.2f')} | {_f(r['p99_ms'], '.2f')} | "
            f"{_f(r.get('client_cores'), '.2f')} | {_f(r.get('broker_cores'), '.2f')} |"
        )
    lines += [
        "",
        "Latency columns: produce rows, send to acknowledgement (sampled); consume rows, per fetch; "
        "end-to-end, produce to consume. CPU columns: cores busy during the run (the machine has 2), the "
        "perf client's own process and all brokers together.",
        "",
        "| partitions (RF 3) | produce records/s (acks=1, 100 B) | idle RSS per partition, KB | "
        "Metadata p50 / p99 ms | controller failover s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for p in data["scaling"]:
        lines.append(
            f"| {p['partitions']} | {p['records_per_s']:,.0f} | {p['rss_kb_per_partition']:.0f} | "
            f"{p['metadata_p50_ms']:.2f} / {p['metadata_p99_ms']:.2f} | {p['failover_s']:.2f} |"
        )
    lines += [
        "",
        "Failover: kill -9 of the controller (zookeeper.session.timeout.ms 3000) until a survivor's "
        "Metadata names a new controller and a live leader for every partition.",
        "",
        "| target (issue 10 unless named) | measured | met |",
        "|---|---|---|",
    ]
    for name, measured, met in targets(data):
        lines.append(f"| {name} | {measured} | {'yes' if met else 'MISSED'} |")
    return "\n".join(lines) + "\n"


def chart(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, scale, costs) = plt.subplots(1, 3, figsize=(16, 6), gridspec_kw={"width_ratios": [3, 1.4, 1.4]})
    rows = [r for r in data["rows"] if "10k records/s" not in r["case"]]
    bars.barh(range(len(rows)), [r["ratio"] for r in rows], color="tab:blue")
    bars.set_yticks(range(len(rows)), [f"{r['case']} ({r['client']})" for r in rows], fontsize=7)
    bars.invert_yaxis()
    bars.axvline(0.5, color="tab:red", linestyle="--", linewidth=1)
    bars.set_xlabel(f"MB/s / ceiling ({data['ceiling_mb_s']:.0f} MB/s); red: the 50% target")
    bars.set_title("throughput as a share of the ceiling")
    points = data["scaling"]
    xs = [p["partitions"] for p in points]
    scale.plot(xs, [p["records_per_s"] / 1000 for p in points], marker="o")
    scale.set_xscale("log")
    scale.set_ylim(bottom=0)
    scale.set_xlabel("partitions (RF 3)")
    scale.set_title("produce, k records/s")
    costs.plot(xs, [p["failover_s"] for p in points], marker="s", color="tab:orange", label="controller failover, s")
    costs.plot(
        xs, [p["metadata_p50_ms"] / 10 for p in points], marker="^", color="tab:green", label="Metadata p50, ms / 10"
    )
    costs.axhline(5, color="tab:red", linestyle="--", linewidth=1)
    costs.set_xscale("log")
    costs.set_ylim(bottom=0)
    costs.set_xlabel("partitions (RF 3)")
    costs.set_title("failover (red: the 5 s target)")
    costs.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def update_readme(readme: Path, markdown_text: str) -> None:
    """Replace the text between the bench:cluster markers (which must exist)."""
    text = readme.read_text()
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no {README_START} ... {README_END} section")
    block = f"{README_START}\n{markdown_text}\n![cluster bench](../bench/results/cluster.png)\n{README_END}"
    readme.write_text(pattern.sub(lambda m: block, text))
