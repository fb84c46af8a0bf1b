"""Source diffs for the Compare page: a unified diff, a side-by-side HTML table, kernel paths for a git diff."""

from __future__ import annotations

import difflib
import html
from collections.abc import Sequence


def unified_diff(a: str | None, b: str | None, name_a: str, name_b: str, context: int = 3) -> str:
    lines = difflib.unified_diff(
        (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True), name_a, name_b, n=context
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


SIDE_BY_SIDE_CSS = """
<style>
table.kb-diff {font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px;
               border-collapse: collapse; width: 100%; table-layout: fixed;}
table.kb-diff td {padding: 0 6px; vertical-align: top; white-space: pre-wrap; word-break: break-all;}
table.kb-diff td.kb-no {width: 3.2em; color: #888; text-align: right; user-select: none;}
table.kb-diff th {text-align: left; padding: 4px 6px; border-bottom: 1px solid #ddd;}
table.kb-diff tr.kb-sep td {background: #f0f0f7; color: #777; text-align: center;}
td.kb-del {background: #ffecec;} td.kb-add {background: #eaffea;}
td.kb-del span.kb-ch {background: #ffb6b6;} td.kb-add span.kb-ch {background: #a6f3a6;}
</style>
"""


def _mark_changes(old: str, new: str) -> tuple[str, str]:
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    left, right = [], []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        a, b = html.escape(old[i1:i2]), html.escape(new[j1:j2])
        if op == "equal":
            left.append(a)
            right.append(b)
        else:
            if a:
                left.append(f'<span class="kb-ch">{a}</span>')
            if b:
                right.append(f'<span class="kb-ch">{b}</span>')
    return "".join(left), "".join(right)


def side_by_side_html(a: str | None, b: str | None, name_a: str, name_b: str, context: int = 3) -> str:
    """An HTML table with the two sources side by side: changed lines highlighted, unchanged runs folded."""
    la, lb = (a or "").splitlines(), (b or "").splitlines()
    rows = [f'<tr><th colspan="2">{html.escape(name_a)}</th><th colspan="2">{html.escape(name_b)}</th></tr>']
    sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
    for group in sm.get_grouped_opcodes(context):
        if rows[1:]:
            rows.append('<tr class="kb-sep"><td colspan="4">⋯</td></tr>')
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                for k in range(i2 - i1):
                    text = html.escape(la[i1 + k])
                    rows.append(
                        f'<tr><td class="kb-no">{i1 + k + 1}</td><td>{text}</td>'
                        f'<td class="kb-no">{j1 + k + 1}</td><td>{text}</td></tr>'
                    )
                continue
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                old = la[i] if i < i2 else None
                new = lb[j] if j < j2 else None
                if old is not None and new is not None:
                    left, right = _mark_changes(old, new)
                else:
                    left = html.escape(old) if old is not None else ""
                    right = html.escape(new) if new is not None else ""
                rows.append(
                    f'<tr><td class="kb-no">{i + 1 if old is not None else ""}</td>'
                    f'<td class="{"kb-del" if old is not None else ""}">{left}</td>'
                    f'<td class="kb-no">{j + 1 if new is not None else ""}</td>'
                    f'<td class="{"kb-add" if new is not None else ""}">{right}</td></tr>'
                )
    if len(rows) == 1:
        rows.append('<tr><td colspan="4">the two sources are identical</td></tr>')
    cols = '<colgroup><col style="width:3.5em"><col><col style="width:3.5em"><col></colgroup>'
    return SIDE_BY_SIDE_CSS + '<table class="kb-diff">' + cols + "".join(rows) + "</table>"


def kernel_paths_in_repo(paths: Sequence[str | None], repo: str | None) -> list[str]:
    """Repository-relative kernel paths, to restrict a git diff to the kernel files."""
    out = []
    for p in paths:
        if not p:
            continue
        if repo and p.startswith(repo.rstrip("/") + "/"):
            p = p[len(repo.rstrip("/")) + 1 :]
        if p not in out:
            out.append(p)
    return out
