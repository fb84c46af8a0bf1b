"""Tables of `tracker fidelity` sessions from the JSON documents `tracker fidelity --json` wrote
(validation/h200_fidelity.sh): per session and case, the contest method's round means (min..max), the tracker's
round means and their median, and whether the median lies inside.

    python validation/fidelity_sessions.py DIR [DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _sessions(dirs: list[Path]) -> list[tuple[str, dict]]:
    docs = []
    for d in dirs:
        for path in sorted(d.glob("*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                print(f"{path}: no JSON (the session did not finish)", file=sys.stderr)
                continue
            if isinstance(doc, dict) and "contest_runs" in doc:
                docs.append((path.stem, doc))
    return docs


def _us(values: list[float]) -> str:
    return " / ".join(f"{v:.1f}" for v in values) or "-"


def table(name: str, doc: dict) -> list[str]:
    lines = [
        f"{name}: session {doc['pair_id']}, {doc['rounds']} rounds, statuses {', '.join(doc['statuses'])}",
        "",
        "| case | contest min..max (us) | tracker median (us) | inside | contest rounds | tracker rounds |",
        "|---|---|---|---|---|---|",
    ]
    for c in doc["cases"]:
        span = "-" if c["contest_min_us"] is None else f"{c['contest_min_us']:.1f}..{c['contest_max_us']:.1f}"
        median = "-" if c["tracker_median_us"] is None else f"{c['tracker_median_us']:.1f}"
        inside = {True: "yes", False: "**no**", None: "-"}[c["inside"]]
        lines.append(
            f"| {c['case']} | {span} | {median} | {inside} | {_us(c['contest_means_us'])} | "
            f"{_us(c['tracker_means_us'])} |"
        )
    return lines + [""]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    docs = _sessions([Path(a) for a in argv])
    for name, doc in docs:
        print("\n".join(table(name, doc)))
    return 0 if docs else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
