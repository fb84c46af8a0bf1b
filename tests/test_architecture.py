"""The package's layers (ARCHITECTURE.md) hold: every import, at module level or inside a function, goes one way.

This reads the source with `ast` rather than importing it, so a function-level import that would only run on
some code path is checked too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# layer -> the layers it may import (besides itself). Order of the keys: most specific prefix first.
ALLOWED: dict[str, set[str]] = {
    "tracker.common": set(),
    "tracker.workloads": {"tracker.common"},
    "tracker.store": {"tracker.common"},
    "tracker.analysis": {"tracker.common", "tracker.store", "tracker.workloads"},
    "tracker.variants": {"tracker.common", "tracker.store", "tracker.workloads"},
    "tracker.capture": {"tracker.common", "tracker.store", "tracker.workloads", "tracker.variants"},
    "tracker.cli": {
        "tracker.common",
        "tracker.store",
        "tracker.workloads",
        "tracker.analysis",
        "tracker.variants",
        "tracker.capture",
    },
    "tracker": {"tracker.cli"},  # tracker/__main__.py
    "pages.ui": {"tracker.common", "tracker.analysis", "tracker.workloads"},
    "pages": {
        "pages.ui",
        "tracker.common",
        "tracker.store",
        "tracker.analysis",
        "tracker.workloads",
        # the dashboard starts runs as background jobs and shows the environment; nothing else of capture
        "tracker.capture.jobs",
        "tracker.capture.envinfo",
    },
    "app": {"pages", "pages.ui", "tracker.common", "tracker.store", "tracker.analysis", "tracker.workloads"},
}
LAYERS = sorted(ALLOWED, key=len, reverse=True)


def _module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str | None:
    for layer in LAYERS:
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: resolve against this module's package
                base = module.split(".")[: -node.level] if path.name != "__init__.py" else module.split(".")
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from tracker.store import connection` imports the submodule tracker.store.connection
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.split(".")[0] in ("tracker", "pages", "app")]


def _sources() -> list[Path]:
    files = [ROOT / "app.py", *(ROOT / "tracker").rglob("*.py"), *(ROOT / "pages").rglob("*.py")]
    return [f for f in files if "shim" not in f.parts]  # the shim is the contest's `task` module, not ours


def _allowed(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def _violations(files: list[Path], root: Path = ROOT) -> list[str]:
    violations = []
    for path in files:
        module = _module_name(path, root)
        layer = _layer(module)
        assert layer is not None, f"{path} is in no layer of ARCHITECTURE.md"
        for line, target in _imports(path, module):
            target_layer = _layer(target)
            if target_layer is None or target_layer == layer or _allowed(target, ALLOWED[layer]):
                continue
            # `from tracker.store import X` names an attribute of a package: allowed when the package is
            if _allowed(target.rsplit(".", 1)[0], ALLOWED[layer] | {layer}):
                continue
            violations.append(f"{path.relative_to(root)}:{line}: {layer} imports {target}")
    return violations


def test_imports_go_one_way() -> None:
    violations = _violations(_sources())
    assert not violations, "imports against the layering:\n" + "\n".join(violations)


def test_no_import_cycles_between_modules() -> None:
    modules = {_module_name(p): p for p in _sources()}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = set()
        for _, target in _imports(path, module):
            while target and target not in modules:  # `from pkg import name` -> pkg
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                deps.add(target)
        graph[module] = deps
    # Packages re-export their submodules (tracker.store -> tracker.store.connection): an edge into a package's own
    # children is not a cycle worth reporting, so drop parent -> child edges before the search.
    for module in graph:
        graph[module] = {d for d in graph[module] if not d.startswith(module + ".")}

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_layering_check_catches_a_wrong_import(tmp_path: Path) -> None:
    """The checker itself can fail: a store module importing capture is reported (the probe lives in a copy of
    the layout under tmp_path, never in the source tree)."""
    bad = tmp_path / "tracker" / "store" / "_layering_probe.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from tracker.capture import runner  # noqa\n")
    good = tmp_path / "tracker" / "store" / "_fine.py"
    good.write_text("from tracker.common import files  # noqa\n")
    assert _violations([bad, good], tmp_path) == [
        "tracker/store/_layering_probe.py:1: tracker.store imports tracker.capture.runner"
    ]
