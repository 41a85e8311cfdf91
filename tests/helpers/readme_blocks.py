"""Code blocks of README.md and docs/*.md between `<!-- name -->` and `<!-- /name -->` markers,
so tests run exactly what a new user copies."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_block(name: str) -> str:
    """The python block between the markers `<!-- name -->` and `<!-- /name -->`."""
    pattern = rf"<!-- {re.escape(name)} -->\n```python\n(.*?)```\n<!-- /{re.escape(name)} -->"
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        m = re.search(pattern, path.read_text(), re.S)
        if m:
            return m.group(1)
    raise AssertionError(f"no python block marked {name} in README.md or docs/")
