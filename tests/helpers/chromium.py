"""Headless Chromium (Debian's `chromium`, installed by `make setup`) for the console's tests:
screenshots of a page and its DOM after rendering (both from one render and one Chromium start,
which `--headless=new` allows)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-extensions",
]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(url: str, path: Path, width: int = 1400, height: int = 1000) -> str:
    """A PNG of the page as Chromium renders it, written to `path`, and the DOM of that same
    render (`--dump-dom`): one Chromium start for both. Raises RuntimeError when no PNG is
    written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    run = subprocess.run(
        [chromium(), *ARGS, f"--window-size={width},{height}", f"--screenshot={path}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not path.exists() or path.stat().st_size == 0:
        raise RuntimeError(f"no screenshot of {url} at {path} (chromium exited {run.returncode}): {run.stderr[-2000:]}")
    return run.stdout


def rendered_dom(url: str) -> str:
    """The DOM Chromium built from the page (`--dump-dom`)."""
    run = subprocess.run([chromium(), *ARGS, "--dump-dom", url], capture_output=True, text=True, timeout=60)
    return run.stdout


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
