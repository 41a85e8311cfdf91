"""The packages depend downwards only (docs/layout.md): no package-level import cycle, and in
particular nothing below `broker/` imports it. Read from the source with `ast`, so the test sees
imports inside functions too."""

import ast
import functools
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
    },
    # examples/exactly_once.py runs on the main job's cluster helpers (minikafka_cli.flights)
    "examples": {"protocol", "client", "security", "broker", "minikafka_cli"},
    # what applications import: a local cluster for their tests (minikafka.testing)
    "minikafka": {"protocol", "client", "security", "local_cluster"},
}


@functools.cache
def _tree(path: pathlib.Path) -> ast.Module:
    """A source file's syntax tree, parsed once for all the tests here (none changes a tree):
    each test walks every module of several packages, and parsing them again was most of this
    file's time (`make test-fast`)."""
    return ast.parse(path.read_text())


def imported_packages(package: str) -> dict[str, set[str]]:
    """{module path: project packages it imports}."""
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        names = set()
        for node in ast.walk(_tree(path)):
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
            yield path, _tree(path)


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module, *, type_checking: bool = False) -> set[str]:
    """Modules a module imports when it runs (inside functions too), and with `type_checking`
    those it imports for its annotations only (under TYPE_CHECKING)."""
    skipped = set()
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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
    broker/handlers and its ApiVersions handler had one; issue 45: authz -> context ->
    control_plane -> authz and storage/log <-> producer_state_loader, through annotations): the
    module graph is acyclic, annotation-only (TYPE_CHECKING) imports included."""
    trees = {_module_name(path): tree for path, tree in _sources()}
    graph = {
        name: {m for m in _runtime_imports(tree, type_checking=True) if m in trees and m != name}
        for name, tree in trees.items()
    }
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
        imported = _runtime_imports(_tree(ROOT / module))
        assert not {m for m in imported if m.startswith(("broker.delayed", "broker.append"))}, module


def test_the_coordinators_see_the_broker_through_their_protocol_only():
    """coordinator/ names no replica manager: both coordinators append and replay through
    `coordinator.runtime.PartitionLog` (the broker's `CoordinatorPartitionLog`)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in (ROOT / "coordinator").rglob("*.py")
        for node in ast.walk(_tree(path))
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


#: one home per idea (issue 45): these names are declared in one module only
ONE_HOME = {"TopicPartition": "protocol/topic_partition.py", "TopicIdPartition": "protocol/topic_partition.py"}


def test_each_shared_alias_is_declared_once():
    """`TopicPartition` (and `TopicIdPartition`) are declared in protocol/topic_partition.py and
    imported everywhere else; a module that spells the alias again (`TopicPartition = ...`,
    `TopicPartition: TypeAlias = ...`,
    `class TopicPartition`) is named here."""
    found = []
    for path, tree in _sources():
        where = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if isinstance(node, ast.ClassDef):
                names.append(node.name)
            found += [f"{where}:{node.lineno} {n}" for n in names if n in ONE_HOME and ONE_HOME[n] != where]
    assert found == []


def test_coordinators_write_only_through_the_runtime():
    """Issue 45: coordinator/ appends only through `CoordinatorRuntime.write` (the operation's
    records committed, then replayed). Outside coordinator/runtime.py no coordinator module
    calls `append` on a runtime, a manager or a partition log, nor defines an `append` of its own."""
    found = []
    for path in (ROOT / "coordinator").rglob("*.py"):
        where = str(path.relative_to(ROOT))
        if where == "coordinator/runtime.py":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "append":
                found.append(f"{where}:{node.lineno} defines append")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "append"
                and ast.unparse(node.func.value).endswith(("runtime", "manager", "partition_log"))
            ):
                found.append(f"{where}:{node.lineno} {ast.unparse(node.func)}")
    assert found == []


def test_a_groups_state_changes_only_through_its_transition_function():
    """Issue 45: in coordinator/group/, `state` is assigned only by `GroupMetadata.transition_to`
    (which checks Kafka's allowed transitions, VALID_PREVIOUS) and `replace_classic` (the group
    a conversion builds takes over); a new group names its first state when it is built."""
    allowed = {
        ("coordinator/group/group_metadata.py", "transition_to"),
        ("coordinator/group/group_metadata.py", "replace_classic"),
    }
    found = []
    for path in (ROOT / "coordinator" / "group").rglob("*.py"):
        where = str(path.relative_to(ROOT))
        tree = _tree(path)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or (where, function.name) in allowed:
                continue
            for node in ast.walk(function):
                targets = (
                    node.targets
                    if isinstance(node, ast.Assign)
                    else [node.target]
                    if isinstance(node, ast.AugAssign | ast.AnnAssign)
                    else []
                )
                flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
                found += [
                    f"{where}:{node.lineno} {ast.unparse(t)}"
                    for t in flat
                    if isinstance(t, ast.Attribute) and t.attr == "state"
                ]
    assert found == []


def test_exceptions_named_for_a_kafka_error_are_kafka_errors_and_each_is_used():
    """Issue 45: an exception class named after a Kafka error (ProducerFenced for
    PRODUCER_FENCED, SaslAuthenticationFailed, IllegalSaslState, ...) is a `KafkaError` carrying
    that code, and no `KafkaError` class is dead: each is named somewhere besides its own class
    statement (raised, caught, or the base of another)."""
    import importlib

    from protocol.errors import ErrorCode, KafkaError

    camel = {"".join(w.capitalize() for w in e.name.split("_")): e for e in ErrorCode}
    wrong, declared = [], {}
    for package in ("protocol", "storage", "broker", "controller", "coordinator", "security", "client", "zk"):
        for path in (ROOT / package).rglob("*.py"):
            module = importlib.import_module(_module_name(path))
            for name, value in vars(module).items():
                if (
                    not (isinstance(value, type) and issubclass(value, BaseException))
                    or value.__module__ != module.__name__
                ):
                    continue
                if issubclass(value, KafkaError):
                    declared[name] = str(path.relative_to(ROOT))
                code = camel.get(name)
                if code is not None and not (issubclass(value, KafkaError) and value.error_code == code):
                    wrong.append(f"{value.__module__}.{name} is not a KafkaError with {code.name}")
    assert wrong == []
    uses: dict[str, int] = dict.fromkeys(declared, 0)
    for _path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute):
                name = node.id if isinstance(node, ast.Name) else node.attr
                if name in uses:
                    uses[name] += 1
    assert sorted(f"{declared[n]} {n}" for n, count in uses.items() if count == 0) == []


def test_no_polling_where_an_event_can_be_awaited():
    """Issue 45: the broker's packages wait for a condition by awaiting what changes it (the
    metadata cache's `wait_until`, the controller's `wait_settled`, an Event), never with a loop
    whose whole body is a sleep (`while not done: await trio.sleep(0.01)`). Periodic timers,
    whose loops do work after the sleep, are not polling."""
    found = []
    for package in (
        "protocol",
        "zk",
        "storage",
        "controller",
        "coordinator",
        "security",
        "metrics",
        "console",
        "broker",
    ):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(_tree(path)):
                if (
                    isinstance(node, ast.While)
                    and len(node.body) == 1
                    and isinstance(node.body[0], ast.Expr)
                    and isinstance(node.body[0].value, ast.Await)
                    and "sleep" in ast.unparse(node.body[0].value)
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} while {ast.unparse(node.test)}")
    assert found == []


def test_the_coordinators_compose_their_parts():
    """Issue 45: no coordinator class is built from mixins: a class of coordinator/ inherits from
    no class of coordinator/ (exceptions and enums aside), and no coordinator module declares
    method stubs for a host class (`raise NotImplementedError`, functions under TYPE_CHECKING)."""
    import enum
    import importlib

    found = []
    for path in (ROOT / "coordinator").rglob("*.py"):
        module = importlib.import_module(_module_name(path))
        for value in vars(module).values():
            if not isinstance(value, type) or value.__module__ != module.__name__:
                continue
            for base in value.__mro__[1:]:
                if base.__module__.startswith("coordinator.") and not issubclass(base, BaseException | enum.Enum):
                    found.append(f"{value.__module__}.{value.__name__} inherits {base.__name__}")
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Raise) and node.exc is not None and "NotImplementedError" in ast.unparse(node.exc):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} raise NotImplementedError")
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                if any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for s in node.body for n in ast.walk(s)):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} method stubs under TYPE_CHECKING")
    assert found == []


#: every package that runs in production (tests/ excluded): where a public method must be used
PRODUCTION = sorted(set(ALLOWED) | {"chaos", "bench", "spark_connector", "tools"})


def test_no_public_method_serves_only_the_tests():
    """Issue 45 (`become_leader_or_follower` ran only in tests while the broker ran another
    path): every public method of a class in broker/, coordinator/, storage/ and controller/ is
    named somewhere in the project's own code besides its definition. trio Instrument hooks,
    which trio calls, are exempt."""
    named: set[str] = set()
    methods = []
    for package in PRODUCTION:
        for path in (ROOT / package).rglob("*.py"):
            tree = _tree(path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute):
                    named.add(node.attr)
                elif isinstance(node, ast.Name):
                    named.add(node.id)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    named.add(node.value)  # getattr(x, "name"), metrics reading attributes
                elif (
                    package in ("broker", "coordinator", "storage", "controller")
                    and isinstance(node, ast.ClassDef)
                    and "Instrument" not in ast.unparse(node).split(":", 1)[0]
                ):
                    methods += [
                        (f"{path.relative_to(ROOT)}:{f.lineno}", f.name)
                        for f in node.body
                        if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and not f.name.startswith("_")
                    ]
    assert [f"{where} {name}" for where, name in methods if name not in named] == []


def test_the_append_origin_reaches_the_log():
    """Issue 45: the origin of an append (Kafka's AppendOrigin, storage/append_origin.py) is
    passed down to the partition and the log, which validate by it, instead of becoming two
    booleans on the way."""
    import inspect

    from broker.partition import Partition
    from storage.append_origin import AppendOrigin
    from storage.log import Log

    for method in (Log.append_as_leader, Partition.append_records_as_leader):
        parameters = inspect.signature(method).parameters
        assert "origin" in parameters and parameters["origin"].default is AppendOrigin.CLIENT
        assert not {"validate_records", "markers"} & set(parameters)
