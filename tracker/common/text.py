"""Text for people, in the CLI and on the pages: counted nouns, context names, profiled kernels' short names, and
stored strings made safe for a terminal (imported data may carry ANSI (CSI) or OSC escapes that recolour, retitle,
hide output or plant links; the CLI's human-readable output goes through `printable`)."""

from __future__ import annotations

import re
from typing import Any, TextIO

# Whole escape sequences first (so no `[31m` remnant is left), then any other C0/C1 control but newline and tab.
_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC ... BEL or ST (hyperlinks, window titles)
    r"|\x1b[P^_X][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, PM, APC, SOS strings
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI (colours, cursor moves, erase)
    r"|\x1b[ -/]*[0-~]?"  # other two-character escapes
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without terminal control sequences or control characters (newline and tab stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


class PrintableStream:
    """A text stream that writes through `printable`: every human-readable line of the CLI, whatever module
    prints it. Anything else (flush, fileno, isatty, encoding) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        self.wrapped.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """ "1 run", "2 runs", "1,200 runs": a count with its noun in the number it needs."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def context_name(suite: str, gpu: str | None = None, problem: str | None = None) -> str:
    """A context as the views name it, `problem · suite · gpu`: the problem left out where the suite already names
    it (qr_v2's suite is qr_v2: "qr_v2 · qr_v2" read twice) or where none is given, the GPU where none is given."""
    parts = ([problem] if problem not in (None, suite) else []) + [suite] + ([gpu] if gpu is not None else [])
    return " · ".join(str(p) for p in parts)


def _strip_brackets(text: str, pairs: str) -> str:
    """`text` without what any bracket pair in `pairs` ("<>", "()") encloses, nested ones included."""
    out, depth = [], 0
    opening, closing = pairs[0], pairs[1]
    for ch in text:
        if ch == opening:
            depth += 1
        elif ch == closing and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    return "".join(out)


def short_kernel(name: Any, limit: int = 40) -> str:
    """A profiled kernel's name as a person scans it: a C++ signature of hundreds of characters
    (`void at::native::(anonymous namespace)::vectorized_elementwise_kernel<4, ...>(int, ...)`) loses its template
    and call arguments, return type and all but the last two scopes; anything longer than `limit` is cut."""
    if not isinstance(name, str):
        return ""
    text = _strip_brackets(_strip_brackets(name.replace("(anonymous namespace)", ""), "<>"), "()").strip()
    text = text.split()[-1] if text.split() else name  # drop the return type and qualifiers before the name
    scopes = [p for p in text.split("::") if p]
    text = "::".join(scopes[-2:]) if scopes else name
    return text if len(text) <= limit else text[: limit - 1] + "…"
