"""The timing-fidelity table from validation/h200_fidelity_pool.sh's results: per case, the tracker's runs, their
median, the spec loop's runs and their range, and whether the median falls inside it.

    python validation/fidelity_table.py DIR     # DIR holds fid_tracker_c{case}_r{round}.json and fid_spec_...
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path


def read_means(folder: Path) -> dict[tuple[str, int], dict[int, float]]:
    """(loop, case) -> {round: mean in us}, from the tracker's --json and the spec loop's --json files."""
    means: dict[tuple[str, int], dict[int, float]] = {}
    for path in folder.glob("fid_*_c*_r*.json"):
        loop, case, rnd = re.fullmatch(r"fid_(tracker|spec)_c(\d+)_r(\d+)\.json", path.name).groups()
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a job that was cut off: its figure is missing from the table
        if loop == "tracker":
            found = [c["mean_us"] for c in doc.get("cases", []) if c.get("case_idx") == int(case) and c.get("mean_us")]
        else:
            found = [c["mean_us"] for c in doc.values() if c.get("case_idx") == int(case)]
        if found:
            means.setdefault((loop, int(case)), {})[int(rnd)] = found[0]
    return means


def table(means: dict[tuple[str, int], dict[int, float]]) -> str:
    lines = [
        "| case | tracker runs | median | spec loop runs | spec min..max | inside |",
        "|---|---|---|---|---|---|",
    ]
    for case in sorted({c for _, c in means}):
        tracker = [v for _, v in sorted(means.get(("tracker", case), {}).items())]
        spec = [v for _, v in sorted(means.get(("spec", case), {}).items())]
        median = statistics.median(tracker) if tracker else None
        inside = "-" if median is None or not spec else ("yes" if min(spec) <= median <= max(spec) else "no")
        lines.append(
            f"| {case} | {' / '.join(f'{v:,.1f}' for v in tracker) or '-'} | "
            f"{'-' if median is None else f'{median:,.1f}'} | {' / '.join(f'{v:,.1f}' for v in spec) or '-'} | "
            f"{f'{min(spec):,.1f}..{max(spec):,.1f}' if spec else '-'} | {inside} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: python validation/fidelity_table.py DIR")
    print(table(read_means(Path(sys.argv[1]))))
