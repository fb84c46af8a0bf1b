"""Tables of paired A/B sessions from the JSON documents `tracker ab --json` wrote (validation/h200_pairs.sh).

    python validation/pairs_table.py DIR [DIR ...]

A/A sessions (aa-*.json): per session the cases flagged (verdict faster or slower), and the share over all.
Planted sessions (planted-*.json): per session the verdict and ratio on the planted case and on the control.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PLANTED_CASE = "40x352"


def _sessions(dirs: list[Path], prefix: str) -> list[dict]:
    docs = []
    for d in dirs:
        for path in sorted(d.glob(f"{prefix}-*.json"), key=lambda p: int(p.stem.split("-")[-1])):
            try:
                docs.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                print(f"{path}: no JSON (the session did not finish)", file=sys.stderr)
    return docs


def _flagged(case: dict) -> bool:
    return case["verdict"] in ("faster", "slower")


def aa_table(docs: list[dict]) -> list[str]:
    lines = ["| session | rounds | cases judged | flagged | largest move |", "|---|---|---|---|---|"]
    judged = flagged = 0
    for doc in docs:
        cases = [c for c in doc["cases"] if c["verdict"] != "n/a"]
        hits = [c for c in cases if _flagged(c)]
        judged, flagged = judged + len(cases), flagged + len(hits)
        worst = max(cases, key=lambda c: abs((c["ratio"] or 1) - 1), default=None)
        move = f"{worst['case']} {worst['ratio']:.4f}" if worst else "-"
        names = ", ".join(f"{c['case']} {c['mark']}" for c in hits) or "none"
        lines.append(f"| {doc['pair_id']} | {doc['rounds']} | {len(cases)} | {names} | {move} |")
    share = f"{flagged / judged:.1%}" if judged else "-"
    lines.append(f"| all {len(docs)} | | {judged} | {flagged} ({share}) | |")
    return lines


def planted_table(docs: list[dict]) -> list[str]:
    lines = ["| session | rounds | planted case: verdict, ratio | control: verdict, ratio |", "|---|---|---|---|"]
    hits = 0
    for doc in docs:
        planted = [c for c in doc["cases"] if c["case"].startswith(PLANTED_CASE)]
        control = [c for c in doc["cases"] if not c["case"].startswith(PLANTED_CASE)]
        hits += any(c["verdict"] == "slower" for c in planted)

        def cell(cs: list[dict]) -> str:
            return "; ".join(f"{c['verdict']} {c['ratio']:.4f}" if c["ratio"] else c["verdict"] for c in cs) or "-"

        lines.append(f"| {doc['pair_id']} | {doc['rounds']} | {cell(planted)} | {cell(control)} |")
    share = f"{hits / len(docs):.0%}" if docs else "-"
    lines.append(f"| detected | | {hits} / {len(docs)} ({share}) | |")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    dirs = [Path(a) for a in argv]
    for title, prefix, table in (("A/A", "aa", aa_table), ("Planted", "planted", planted_table)):
        docs = _sessions(dirs, prefix)
        if docs:
            print(f"{title} ({len(docs)} sessions)\n")
            print("\n".join(table(docs)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
