"""The packages depend downwards only (README "Layout"): no package-level import cycle, and in
particular nothing below `broker/` imports it. Read from the source with `ast`, so the test sees
imports inside functions too."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
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
    # the web console: reads the broker's objects by their attributes, as metrics/ does
    "console": {"protocol", "storage", "security", "coordinator"},
    "broker": {"protocol", "zk", "storage", "client", "controller", "coordinator", "security", "metrics", "console"},
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
    # what applications import: a local cluster for their tests (minikafka.testing)
    "minikafka": {"protocol", "client", "security", "local_cluster"},
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


#: every package of the project, for the module-level checks below
PROJECT = sorted(set(ALLOWED) | {"chaos", "bench", "spark_connector", "tools"})


def _sources():
    for package in PROJECT:
        for path in (ROOT / package).rglob("*.py"):
            yield path, ast.parse(path.read_text())


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module) -> set[str]:
    """Modules a module imports when it runs (inside functions too; not under TYPE_CHECKING)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    names = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_no_module_imports_itself_through_others():
    """No import loop between modules (issue 35: chaos/runner.py and chaos/transactions.py,
    broker/handlers and its ApiVersions handler had one): the module graph is acyclic."""
    trees = {_module_name(path): tree for path, tree in _sources()}
    graph = {name: {m for m in _runtime_imports(tree) if m in trees and m != name} for name, tree in trees.items()}
    loops = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for dep in sorted(graph[name]):
            if state.get(dep) == 1:
                loops.append(path[path.index(dep) :] + [dep] if dep in path else [name, dep])
            elif dep not in state:
                visit(dep, path + [dep])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert loops == []


#: names issue 35 removed, which must not come back: the side doors to the append path
#: (one `ReplicaManager.append_records` with an origin), the coordinators' private scaffolding
#: (`coordinator/runtime.py` carries it) and names that did not say what they do
REMOVED_NAMES = {
    "append_internal",
    "append_markers",
    "append_records_now",
    "_await_replication",
    "settle_replication",
    "_APPEND_ERRORS",
    "_early",
    "_changed",
    "poked",
    "_poke",
}


def test_what_issue_35_removed_stays_removed():
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            name = (
                node.attr
                if isinstance(node, ast.Attribute)
                else node.id
                if isinstance(node, ast.Name)
                else node.name
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                else None
            )
            if name in REMOVED_NAMES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and len(t.id) == 1 and t.id.isupper() for t in node.targets)
                and "TypeVar" not in ast.unparse(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} one-letter module alias")
    assert found == []


def test_the_network_layer_does_not_know_delayed_operations():
    """broker/server.py and broker/connection_output.py import nothing of the purgatory
    (`broker.delayed`, `broker.append`): an inline handler responds through a callback, and a
    completion from another task only hands the response to the connection's queue."""
    for module in ("broker/server.py", "broker/connection_output.py"):
        imported = _runtime_imports(ast.parse((ROOT / module).read_text()))
        assert not {m for m in imported if m.startswith(("broker.delayed", "broker.append"))}, module


def test_the_coordinators_see_the_broker_through_their_protocol_only():
    """coordinator/ names no replica manager: both coordinators append and replay through
    `coordinator.runtime.PartitionLog` (the broker's `CoordinatorPartitionLog`)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in (ROOT / "coordinator").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute | ast.Name | ast.arg)
        and "replica_manager" in (getattr(node, "attr", None) or getattr(node, "id", None) or getattr(node, "arg", ""))
    ]
    assert found == []


def test_one_error_convention():
    """Errors answered with a Kafka code are `protocol.errors.KafkaError`s carrying
    `error_code` (never `.code`), declared with class statements (never built with `type()`)."""
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "code" and isinstance(node.ctx, ast.Store):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} sets .code")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "type"
                and len(node.args) == 3
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} builds a class with type()")
    assert found == []
    import importlib

    from protocol.errors import KafkaError

    outside = set()
    for package in ("protocol", "storage", "broker", "controller", "coordinator", "security", "client", "zk"):
        for path in (ROOT / package).rglob("*.py"):
            module = importlib.import_module(_module_name(path))
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and hasattr(value, "error_code")
                    and not issubclass(value, KafkaError)
                ):
                    outside.add(f"{value.__module__}.{value.__qualname__}")
    assert outside == set()
