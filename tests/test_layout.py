"""The layout the README's architecture section promises, checked from the source:
no import cycles, a room core that knows no sockets, a client that knows no server.

Imports are read with ``ast`` (module level and inside functions alike — a deferred
import is still a cycle; only ``if TYPE_CHECKING:`` blocks, which never run, are left
out), so the test sees what the code would do, without importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"solrace": ROOT / "server", "solrace_client": ROOT / "client"}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of both packages: dotted name -> (file, is a package)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package, base in SOURCES.items():
        for path in (base / package).rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """What module ``name`` imports (every module named, and the names it imports
    from a module when they are modules themselves)."""
    path, is_package = MODULES[name]
    found: set[str] = set()
    here = name if is_package else name.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = here
                for _ in range(max(child.level - 1, 0)):
                    base = base.rpartition(".")[0]
                if child.level:
                    module = f"{base}.{child.module}" if child.module else base
                else:
                    module = child.module or ""
                submodules = {f"{module}.{a.name}" for a in child.names} & MODULES.keys()
                found.update(submodules)
                if len(submodules) < len(child.names):
                    found.add(module)  # it imports names defined in the module itself
            visit(child)

    visit(ast.parse(path.read_text("utf-8")))
    return found - {name}


GRAPH = {name: _imports(name) for name in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v] & MODULES.keys():
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            connect(v)
    return cycles


def _under(prefix: str) -> dict[str, set[str]]:
    return {m: deps for m, deps in GRAPH.items() if m == prefix or m.startswith(prefix + ".")}


def _offending(prefix: str, forbidden: tuple[str, ...]) -> dict[str, set[str]]:
    return {
        module: {d for d in deps if d.startswith(forbidden)}
        for module, deps in _under(prefix).items()
        if any(d.startswith(forbidden) for d in deps)
    }


def test_no_import_cycles_in_the_server_or_the_client() -> None:
    assert _cycles() == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check itself can fail: a deferred import of the node into the room
    module would be reported."""
    GRAPH["solrace.rooms.room"].add("solrace.rooms.node")
    try:
        assert any("solrace.rooms.room" in c for c in _cycles())
    finally:
        GRAPH["solrace.rooms.room"].discard("solrace.rooms.node")


def test_the_room_core_imports_no_sockets_and_no_adapter() -> None:
    assert _offending("solrace.rooms", ("websockets", "solrace.net")) == {}


def test_the_rules_race_and_protocol_cores_import_no_io() -> None:
    for core in ("solrace.rules", "solrace.race", "solrace.solver"):
        assert _offending(core, ("websockets", "redis", "solrace.net", "solrace.store")) == {}


def test_the_rules_engine_imports_no_benchmark() -> None:
    """The rules engine (its command line too) sits below everything that measures it:
    solrace-rules took the solver's budget bound from solrace.bench.limits, so the
    engine depended on the benchmark package (it now comes from solrace.solver_budget,
    which the solver, the rules command line and the bench all read)."""
    assert _offending("solrace.rules", ("solrace.bench",)) == {}


def test_the_client_imports_no_server_side() -> None:
    server_side = ("solrace.net", "solrace.store", "solrace.rooms", "redis", "fakeredis")
    assert _offending("solrace_client", server_side) == {}


def test_net_holds_only_the_socket_adapter() -> None:
    """net/ is the WebSocket server, sessions, connection limits (and the event loop's
    stalls their rate limits allow for), HTTP, the entry point, logs and metrics; the
    room logic lives in solrace.rooms."""
    net = {m.rpartition(".")[2] for m in _under("solrace.net")} - {"net"}
    assert net == {"server", "session", "admission", "stalls", "main", "logs", "metrics"}


def test_the_repository_refers_to_no_document_outside_it() -> None:
    """The rule book and the design brief live in docs/ (docs/rules.md, docs/design.md);
    nothing points at a file beside the repository."""
    outside = ("../shared", "RULES.md", "DESIGN.md", "seeds/00")
    offending = []
    for base in ("server", "client", "tests", "docs", "deploy", ".ci"):
        for path in (ROOT / base).rglob("*"):
            if path.suffix not in (".py", ".md", ".lua", ".sh", ".yaml", ".yml", ".conf", "") or (
                not path.is_file()
            ):
                continue
            if path == Path(__file__):
                continue
            text = path.read_text("utf-8", errors="replace")
            offending += [f"{path.relative_to(ROOT)}: {word}" for word in outside if word in text]
    readme = (ROOT / "README.md").read_text("utf-8")
    offending += [f"README.md: {word}" for word in outside if word in readme]
    assert offending == []


def test_no_type_check_is_silenced_in_the_server_or_the_client() -> None:
    """mypy --strict checks every line: no ``type: ignore`` (issue 9; argparse's
    overloaded parse methods are restated in ``solrace.argtypes.OneLineParser``, whose
    subclasses hook ``_parsing``/``_parsed`` instead of overriding them)."""
    silenced = [
        f"{path.relative_to(ROOT)}:{number}"
        for path, _ in MODULES.values()
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if "type: ignore" in line
    ]
    assert silenced == []
