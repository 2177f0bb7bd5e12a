"""The package's layers: what may import what, checked on the source, so a cycle cannot creep back."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_cuzk"
MAX_LINES = 400


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against its package)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
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


def test_the_wire_layer_imports_nothing_of_the_plugin_or_the_engine():
    for path in _sources("wire"):
        ours = {m for m in _imports(path) if m.startswith("pytest_cuzk.")}
        assert all(m.startswith("pytest_cuzk.wire") for m in ours), f"{path.name}: {sorted(ours)}"


def test_the_reference_engine_imports_only_the_wire_layer_and_the_proto():
    allowed = ("pytest_cuzk.refengine", "pytest_cuzk.wire", "pytest_cuzk.proto")
    for path in _sources("refengine"):
        ours = {m for m in _imports(path) if m.startswith("pytest_cuzk.")}
        bad = sorted(m for m in ours if not m.startswith(allowed))
        assert not bad, f"refengine/{path.name} imports the plugin: {bad}"


def test_the_plugin_reaches_the_reference_engine_only_through_its_backend():
    for path in _sources():
        if "refengine" in path.parts or path.name == "reference.py":
            continue
        engine = sorted(m for m in _imports(path) if m.startswith("pytest_cuzk.refengine"))
        assert not engine, f"{path.relative_to(PACKAGE)} imports the reference engine: {engine}"


def test_no_hand_written_module_is_over_400_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, long
