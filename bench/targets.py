"""The measured-vs-target tables of the issue benches (`group_bench`, `cleaner_bench`): rendered
as markdown, printed, written to `bench/results/<name>.md` and copied into docs/benchmarks.md between the
bench's `<!-- bench:<name>:start -->` / `end` markers."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
Row = tuple[str, str, str, bool | None]  # measurement, measured, target, met (None: no target, "n/a")


def render(rows: list[Row], issue: int | str) -> str:
    lines = [f"| measurement (issue {issue}) | measured | target | met |", "|---|---|---|---|"]
    lines += [
        f"| {name} | {measured} | {target} | {'n/a' if ok is None else 'yes' if ok else 'NO'} |"
        for name, measured, target, ok in rows
    ]
    return "\n".join(lines) + "\n"


def marked_document(start: str) -> Path | None:
    """The document (README.md or docs/*.md) holding the marker `start`, or None."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.exists() and start in path.read_text():
            return path
    return None


def publish(table: str, name: str) -> None:
    """Write `bench/results/<name>.md` and the `bench:<name>` section of docs/benchmarks.md
    (whichever document holds its markers)."""
    (ROOT / "bench" / "results" / f"{name}.md").write_text(table)
    start, end = f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"
    document = marked_document(start)
    if document is not None:
        text = re.sub(
            re.escape(start) + ".*?" + re.escape(end), f"{start}\n{table}{end}", document.read_text(), flags=re.S
        )
        document.write_text(text)


def main(argv, description: str, run: Callable[[bool], list[Row]], issue: int | str, name: str) -> int:
    """A bench's command line: `--quick` (tiny sizes for tests, nothing published)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (tests); the numbers mean nothing")
    args = parser.parse_args(argv)
    table = render(run(args.quick), issue)
    print(table)
    if not args.quick:
        publish(table, name)
    return 0
