"""Docstrings that name our code name what exists (issue 45: "docstrings checked against the
code"). In `broker/`, `coordinator/` and `storage/`, every backticked file path (from the
repository root or the docstring's own directory) must exist, and every backticked snake_case
name (a function, method, attribute, argument, field or config key, possibly dotted or called)
must be defined or spelled somewhere in the project. Names of internal topics (`__...`) are
not code. What a docstring *claims* the code does is for review; this catches the names that
drift when code is renamed or removed."""

import ast
import importlib.util
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("broker", "coordinator", "storage")
SOURCE_DIRS = (*PACKAGES, "protocol", "zk", "controller", "security", "metrics", "client", "minikafka_cli", "console")
TICKED = re.compile(r"`([^`\n]+)`")
SNAKE = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")
PATH = re.compile(r"[\w/]+\.py")


def _spelled(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.keyword) and n.arg:
            out.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 80:
            out.add(n.value)
    return out


@cache
def project_names() -> frozenset[str]:
    names: set[str] = set()
    for directory in SOURCE_DIRS:
        for path in (ROOT / directory).rglob("*.py"):
            names |= _spelled(ast.parse(path.read_text()))
            names.add(path.stem)
    return frozenset(names)


def docstrings(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc


def unresolved(path: Path, names: frozenset[str], root: Path = ROOT) -> list[str]:
    out = []
    for line, doc in docstrings(path):
        for ref in TICKED.findall(doc):
            where = f"{path.relative_to(root)}:{line}"
            if PATH.fullmatch(ref):
                if not (root / ref).exists() and not (path.parent / ref).exists():
                    out.append(f"{where} `{ref}`: no such file")
                continue
            name = re.sub(r"\(.*\)$", "", ref)
            if not SNAKE.fullmatch(name) or "_" not in name or name.startswith("__"):
                continue  # not a snake_case name of ours (Kafka's camelCase, config keys, prose)
            parts = name.split(".")
            if (root / "/".join(parts)).with_suffix(".py").exists() or (root / "/".join(parts)).is_dir():
                continue  # a module
            if len(parts) > 1 and not (root / parts[0]).exists() and importlib.util.find_spec(parts[0]):
                continue  # another library's (trio.testing.memory_stream_pair)
            if name not in names and parts[-1] not in names:
                out.append(f"{where} `{ref}`: named nowhere in the project")
    return out


def test_docstrings_name_what_exists():
    names = project_names()
    found = [
        u for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py")) for u in unresolved(path, names)
    ]
    assert found == []


def test_the_check_sees_a_renamed_function_and_a_moved_file(tmp_path):
    module = tmp_path / "pkg" / "mod.py"
    module.parent.mkdir()
    module.write_text(
        '"""Uses `write_records` and `pkg/gone.py`; `__consumer_offsets` is a topic."""\n'
        "def write(records):\n"
        '    """Calls `write(records)` and `records`, as Kafka\'s `appendRecords`."""\n'
    )
    names = frozenset(_spelled(ast.parse(module.read_text())))
    assert unresolved(module, names, tmp_path) == [
        "pkg/mod.py:1 `write_records`: named nowhere in the project",
        "pkg/mod.py:1 `pkg/gone.py`: no such file",
    ]
