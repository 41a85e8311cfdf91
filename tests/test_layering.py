"""The packages depend downwards only (README "Layout"): no package-level import cycle, and in
particular nothing below `broker/` imports it. Read from the source with `ast`, so the test sees
imports inside functions too."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: package -> the project packages it may import
ALLOWED = {
    "protocol": set(),
    "zk": set(),
    "storage": {"protocol"},
    "client": {"protocol", "security"},
    "controller": {"protocol", "zk", "storage", "client", "security", "metrics"},
    "coordinator": {"protocol"},
    "security": {"protocol"},
    "metrics": {"protocol"},  # reads the broker's objects by their attributes, never imports broker/
    "broker": {"protocol", "zk", "storage", "client", "controller", "coordinator", "security", "metrics"},
    # process control and the tools above it: local clusters never reach up into the CLI
    "local_cluster": {"protocol", "zk", "client", "security", "broker"},
    "fuzz": {"protocol", "local_cluster"},
    "minikafka_cli": {
        "protocol",
        "zk",
        "storage",
        "client",
        "controller",
        "security",
        "metrics",
        "broker",
        "local_cluster",
        "perf",
        "examples",
    },
    "perf": {"protocol", "client", "security"},
    "examples": {"protocol", "client", "security", "broker"},  # broker.config reads client.properties
}


def imported_packages(package: str) -> dict[str, set[str]]:
    """{module path: project packages it imports}."""
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(ROOT))] = (names & set(ALLOWED)) - {package}
    return out


def test_packages_depend_downwards_only():
    wrong = {
        module: sorted(used - ALLOWED[package])
        for package in ALLOWED
        for module, used in imported_packages(package).items()
        if used - ALLOWED[package]
    }
    assert wrong == {}
