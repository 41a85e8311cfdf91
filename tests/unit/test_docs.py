"""The README a newcomer reads in ten minutes (issue 45): at most 350 lines, and every link in it
and in docs/ resolves to a file of the repository or to a heading of the file it names (GitHub's
anchors: lower case, punctuation dropped, spaces as hyphens)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    found, in_code = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)))
    return found


def broken_links(document: Path, root: Path = ROOT) -> list[str]:
    out, in_code = [], False
    for number, line in enumerate(document.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for match in LINK.finditer(line):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            file_part, _, anchor = target.partition("#")
            linked = (document.parent / file_part).resolve() if file_part else document
            if not linked.exists():
                out.append(f"{document.relative_to(root)}:{number} {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                out.append(f"{document.relative_to(root)}:{number} {target}: no such heading")
    return out


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 350


def test_every_link_resolves():
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert [b for d in documents for b in broken_links(d)] == []


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n[ok](#title) [gone](missing.md) [anchor](#nowhere)\n")
    assert [b.split(" ", 1)[1] for b in broken_links(page, tmp_path)] == [
        "missing.md: no such file",
        "#nowhere: no such heading",
    ]


def test_the_bench_tables_are_written_into_docs_benchmarks():
    """`make bench` publishes each table between its markers in docs/benchmarks.md; README.md
    holds none of them any more."""
    from bench import targets

    names = re.findall(r"<!-- bench:(\w+):start -->", (ROOT / "docs" / "benchmarks.md").read_text())
    assert {"goals", "groups", "transactions", "requests", "cluster"} <= set(names)
    assert {targets.marked_document(f"<!-- bench:{n}:start -->") for n in names} == {ROOT / "docs" / "benchmarks.md"}
    assert "<!-- bench:" not in (ROOT / "README.md").read_text()
