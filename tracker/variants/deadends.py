"""Dead ends: a new variant whose code is a rejected one again, but for constants, names and formatting.

Two sources have the same *shape* when their syntax trees match after every constant becomes one placeholder,
every name (variables, arguments, functions, classes) is renamed in order of first appearance, and docstrings
are dropped; comments and layout never reach the tree. Attribute and keyword names and imported modules are kept:
`torch.geqrf` and `torch.linalg.qr` are different code, `nb = 64` and `block = 128` are not."""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path
from typing import Any

from tracker.common.jsonfields import clean
from tracker.store import Store


class _Normalise(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _name(self, name: str) -> str:
        return self.names.setdefault(name, f"n{len(self.names)}")

    def _body(self, node: ast.AST) -> ast.AST:
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            node.body = body[1:] or [ast.Pass()]  # a docstring says nothing about the code
        return self.generic_visit(node)

    def visit_Module(self, node: ast.Module) -> ast.AST:
        return self._body(node)

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        return self._body(node)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _def

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        return self.generic_visit(node)

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname:
            node.asname = self._name(node.asname)
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        node.names = [self._name(n) for n in node.names]
        return node

    visit_Nonlocal = visit_Global

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(value=0)


def code_shape(source: str) -> str | None:
    """A hash of the normalised syntax tree; None for source that does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    dump = ast.dump(_Normalise().visit(tree), annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()


def repeated_dead_ends(store: str | os.PathLike, source: str, sha256: str | None = None) -> list[dict[str, Any]]:
    """The rejected variants (latest verdict) that `source` repeats: same shape. None of them when the variant
    itself carries a later verdict that is not `rejected` (it was judged on its own and kept)."""
    from pathlib import Path

    if not Path(store).exists():
        return []
    shape = code_shape(source)
    if shape is None:
        return []
    rejected = Store(store).dead_ends(with_source=True)
    if sha256 is not None and Store(store).latest_verdict(sha256) not in (None, "rejected"):
        return []
    return [{k: v for k, v in d.items() if k != "source"} for d in rejected if code_shape(d["source"]) == shape]


def dead_ends_of(store: str | os.PathLike, path: str, *, note: str | None = None, force: bool = False) -> list[dict]:
    """The rejected variants the kernel file repeats, as JSON-safe rows with its path, unless acknowledged: force,
    or a note (hypothesis) that is not the rejected run's own. Empty for an unreadable file (the run reports it);
    StoreLockedError or NotAStoreError for a store that cannot be read."""
    from tracker.common.gitinfo import source_hash

    try:
        source = Path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return []
    found = []
    for d in repeated_dead_ends(store, source, source_hash(source)):
        if force or (note and note != d["note"]):
            continue
        found.append({"path": path, **{k: clean(v) for k, v in d.items()}})
    return found


def dead_end_line(what: str, d: dict[str, Any]) -> str:
    said = f"; assumption: {d['assumption']}" if d.get("assumption") else ""
    return (
        f"warning: {what} is rejected variant {d['variant']} again (run {d['run_id']}, but for constants, names "
        f"and formatting): {d['reason'] or 'no reason given'}{said}. --force, or a --note with a new hypothesis, "
        "acknowledges it"
    )
