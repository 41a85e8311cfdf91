"""Code blocks of README.md between `<!-- name -->` and `<!-- /name -->` markers, so tests run
exactly what a new user copies."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_block(name: str) -> str:
    """The python block between the markers `<!-- name -->` and `<!-- /name -->`."""
    text = README.read_text()
    m = re.search(rf"<!-- {re.escape(name)} -->\n```python\n(.*?)```\n<!-- /{re.escape(name)} -->", text, re.S)
    assert m, f"README.md has no python block marked {name}"
    return m.group(1)
