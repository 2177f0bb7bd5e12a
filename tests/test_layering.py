"""The package's layers: what may import what, checked on the source, so a cycle cannot creep back.

Every import counts, the lazy ones inside functions and those under ``TYPE_CHECKING`` too: a
room may import only the rooms below it. Rooms on one tier are siblings and import each other
not at all. The top-level modules (the entry points) are the top tier.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_cuzk"
MAX_LINES = 400
TOP = "(top level)"

# Lowest first. Keep in step with the Layout section of docs/contributing.md.
LAYERS: list[set[str]] = [
    {"vocab"},
    {"host", "proto"},
    {"refengine"},
    {"core", "results"},
    {"config"},
    {"daemon", "data"},
    {"backends"},
    {"measure"},
    {"run"},
    {"scenarios"},
    {"verdicts"},
    {"sinks"},
    {"html"},
    {"fleet"},
    {TOP},
    {"suite"},
]
TIER = {room: n for n, rooms in enumerate(LAYERS) for room in rooms}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports anywhere in it (relative imports resolved)."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            name = f"{base}.{node.module}" if node.level and node.module else node.module or base
            found |= {name} | {f"{name}.{alias.name}" for alias in node.names}
    return found


def _sources(*parts: str) -> list[Path]:
    return [p for p in PACKAGE.joinpath(*parts).rglob("*.py") if "cuzk/v1" not in p.as_posix()]


def _room(module: str) -> str | None:
    """The room a module of ours lives in; None for the package itself (its version string)."""
    parts = module.split(".")
    if parts[0] != "pytest_cuzk" or len(parts) == 1:
        return None
    if PACKAGE.joinpath(parts[1]).is_dir():
        return parts[1]
    return TOP if PACKAGE.joinpath(f"{parts[1]}.py").exists() else None


def _room_edges() -> dict[tuple[str, str], str]:
    """(importing room, imported room) -> one file that makes the edge."""
    edges: dict[tuple[str, str], str] = {}
    for path in _sources():
        src = _room(_module(path))
        for name in _imports(path):
            dst = _room(name)
            if src is not None and dst is not None and dst != src:
                edges.setdefault((src, dst), str(path.relative_to(PACKAGE)))
    return edges


def test_every_room_is_declared_in_a_layer():
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    declared = set(TIER) - {TOP}
    assert rooms == declared, f"undeclared: {sorted(rooms - declared)}, gone: {sorted(declared - rooms)}"


def test_every_room_says_its_job():
    for room in TIER.keys() - {TOP}:
        doc = ast.get_docstring(ast.parse(PACKAGE.joinpath(room, "__init__.py").read_text()))
        assert doc and len(doc) > 40, f"{room}/__init__.py has no docstring saying its job"


def test_each_room_imports_only_rooms_below_it():
    upward = sorted(
        f"{src} -> {dst} (tier {TIER[src]} -> {TIER[dst]}), in {where}"
        for (src, dst), where in _room_edges().items()
        if TIER[dst] >= TIER[src]
    )
    assert not upward, "\n".join(upward)


def test_the_room_graph_has_no_cycle():
    graph: dict[str, set[str]] = {}
    for src, dst in _room_edges():
        graph.setdefault(src, set()).add(dst)
    state: dict[str, int] = {}

    def visit(room: str, trail: list[str]) -> None:
        state[room] = 1
        for nxt in graph.get(room, ()):
            assert state.get(nxt) != 1, "cycle: " + " -> ".join([*trail, room, nxt])
            if nxt not in state:
                visit(nxt, [*trail, room])
        state[room] = 2

    for room in graph:
        if room not in state:
            visit(room, [])


def test_the_reference_engine_imports_only_the_wire_host_and_proto_rooms():
    allowed = ("pytest_cuzk.refengine", "pytest_cuzk.vocab", "pytest_cuzk.host", "pytest_cuzk.proto")
    for path in _sources("refengine"):
        ours = {m for m in _imports(path) if m.startswith("pytest_cuzk.")}
        bad = sorted(m for m in ours if not m.startswith(allowed))
        assert not bad, f"refengine/{path.name} imports the plugin: {bad}"


def test_the_plugin_reaches_the_reference_engine_only_through_its_backend():
    door = PACKAGE / "backends" / "reference.py"
    for path in _sources():
        if "refengine" in path.relative_to(PACKAGE).parts or path == door:
            continue
        engine = sorted(m for m in _imports(path) if m.startswith("pytest_cuzk.refengine"))
        assert not engine, f"{path.relative_to(PACKAGE)} imports the reference engine: {engine}"


def test_the_top_level_keeps_only_the_entry_points():
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert top == ["__init__", "fixtures", "hookspec", "plugin", "session", "startup"], top


def test_no_hand_written_module_is_over_400_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long


def test_test_modules_have_unique_names():
    """The default import mode keys a test module by its file name alone: two alike stop collection."""
    tests = Path(__file__).resolve().parent
    seen: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert not {name: where for name, where in seen.items() if len(where) > 1}
