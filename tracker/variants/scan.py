"""Static scan of a variant's source for known reward hacks, stored with the run and shown beside its verdict.

It reads the syntax tree (ast), so comments and strings do not trigger it and aliases such as
`import time as t; t.perf_counter = ...` are followed. A flag is a reason to look, not a verdict: a scan
cannot prove a kernel honest, and a determined author can hide any of these behind exec or getattr strings.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import Any

# code -> (severity, what it means). "hack": the result may be forged; "info": worth knowing, often harmless.
FLAGS: dict[str, tuple[str, str]] = {
    "tracker-internals": ("hack", "imports the tracker's own modules"),
    "sys-modules": ("hack", "reads or changes sys.modules"),
    "introspection": ("hack", "walks the interpreter's objects or frames"),
    "timer-patch": ("hack", "replaces a timer or synchronisation function"),
    "identity-cache": ("hack", "keys something on the identity of its inputs (a cache of outputs?)"),
    "side-stream": ("hack", "creates a CUDA stream without waiting for it before returning"),
    "torch-patch": ("hack", "replaces a torch function (the harness makes the inputs with torch in this process)"),
    "process-spawn": ("info", "starts processes or threads"),
    "forged-events": ("hack", "wrote lines into the worker's event channel"),  # set by the runner, not the scan
}
_TIMERS = {
    "torch.cuda.Event",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.record",
    "torch.cuda.Event.synchronize",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.monotonic_ns",
}
_INTROSPECTION = {
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "inspect.stack",
    "inspect.currentframe",
    "inspect.getouterframes",
    "sys._getframe",
    "sys.settrace",
    "sys.setprofile",
}
_SPAWN_PREFIXES = ("subprocess.", "multiprocessing.", "concurrent.futures.")
_SPAWN = {"os.fork", "os.forkpty", "os.system", "os.popen", "os.posix_spawn", "os.spawnv", "os.setsid"}
_SPAWN |= {"threading.Thread"}
_STREAMS = {"torch.cuda.Stream", "torch.cuda.stream", "torch.Stream", "torch.cuda.ExternalStream"}
_WAITS = {"synchronize", "wait_stream", "wait_event", "wait"}


def _torch_function(name: str | None, value: ast.AST | None) -> bool:
    """Whether assigning `value` to `name` replaces something of torch's: a name under torch that is not a setting
    (torch.backends..., a config module) given anything but a constant (True, a number, a string)."""
    if not name or name.split(".")[0] != "torch" or isinstance(value, ast.Constant):
        return False
    return not any(part in ("backends", "config") or part.endswith("_config") for part in name.split(".")[1:])


@dataclass(frozen=True)
class Flag:
    code: str
    line: int
    message: str

    @property
    def severity(self) -> str:
        return FLAGS[self.code][0]


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> dotted module path
        self.flags: list[Flag] = []

    def add(self, code: str, node: ast.AST, detail: str) -> None:
        self.flags.append(Flag(code, getattr(node, "lineno", 0), f"{FLAGS[code][1]}: {detail}"))

    def dotted(self, node: ast.AST) -> str | None:
        """`t.perf_counter` -> 'time.perf_counter' after `import time as t`; None for anything not a name chain."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.aliases.get(node.id, node.id))
        return ".".join(reversed(parts))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else local
            if alias.name.split(".")[0] == "tracker":
                self.add("tracker-internals", node, f"import {alias.name}")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
        if module.split(".")[0] == "tracker":
            self.add("tracker-internals", node, f"from {module} import ...")
        self.generic_visit(node)

    def _target(self, target: ast.AST, node: ast.AST, value: ast.AST | None = None) -> None:
        name = self.dotted(target)
        if name in _TIMERS:
            self.add("timer-patch", node, f"assigns {name}")
        elif _torch_function(name, value):
            self.add("torch-patch", node, f"assigns {name}")
        if isinstance(target, ast.Subscript) and self.dotted(target.value) == "sys.modules":
            self.add("sys-modules", node, "assigns an entry of sys.modules")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._target(target, node, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node)
        if name == "sys.modules":
            self.add("sys-modules", node, "uses sys.modules")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self.dotted(node.func) or ""
        if name in _INTROSPECTION:
            self.add("introspection", node, f"calls {name}()")
        if name in ("setattr", "builtins.setattr") and len(node.args) >= 2:
            owner = self.dotted(node.args[0]) or ""
            attr = node.args[1].value if isinstance(node.args[1], ast.Constant) else "?"
            if f"{owner}.{attr}" in _TIMERS or owner in _TIMERS:
                self.add("timer-patch", node, f"setattr({owner}, {attr!r}, ...)")
            elif _torch_function(f"{owner}.{attr}", node.args[2] if len(node.args) > 2 else None):
                self.add("torch-patch", node, f"setattr({owner}, {attr!r}, ...)")
            if owner == "sys" and attr == "modules":
                self.add("sys-modules", node, "setattr(sys, 'modules', ...)")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr":
            self.add("identity-cache", node, "calls data_ptr()")
        if name == "id" and node.args:
            self.add("identity-cache", node, "calls id() on a value")
        if name.startswith("weakref.") and name.split(".")[-1] in ("ref", "WeakKeyDictionary", "WeakValueDictionary"):
            self.add("identity-cache", node, f"uses {name}")
        if name in _SPAWN or name.startswith(_SPAWN_PREFIXES):
            self.add("process-spawn", node, f"calls {name}()")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        # A stream created in a function that never waits for it lets work run past the timer's stop event.
        streams = [n for n in ast.walk(node) if isinstance(n, ast.Call) and (self.dotted(n.func) or "") in _STREAMS]
        waits = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _WAITS
            for n in ast.walk(node)
        )
        waits = waits or any(
            isinstance(n, ast.Call) and self.dotted(n.func) == "torch.cuda.synchronize" for n in ast.walk(node)
        )
        if streams and not waits:
            self.add("side-stream", streams[0], f"{self.dotted(streams[0].func)}() in {node.name}() with no wait")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def scan_source(source: str) -> list[Flag]:
    """Flags for one variant's source, in line order, one per (code, line)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the import fails and says so; nothing to scan
    scanner = _Scanner()
    scanner.visit(tree)
    seen: set[tuple[str, int]] = set()
    out = []
    for flag in sorted(scanner.flags, key=lambda f: (f.line, f.code)):
        if (flag.code, flag.line) not in seen:
            seen.add((flag.code, flag.line))
            out.append(flag)
    return out


def flags_as_dicts(flags: list[Flag]) -> list[dict[str, Any]]:
    return [{**asdict(f), "severity": f.severity} for f in flags]


def describe(flags: list[dict[str, Any]] | None) -> str:
    """One line for terminals: `timer-patch@12, identity-cache@20`."""
    return ", ".join(f"{f['code']}@{f['line']}" for f in flags or [])
