"""The table of validation/h200_harness_bisect.sh: per configuration, case 0's mean and best repetition in each
round (from the `tracker run --json` documents CONFIG-rK.json), and their medians.

    python validation/harness_bisect_table.py DIR
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

NAME = re.compile(r"^(?P<config>[a-z]+)-r(?P<round>\d+)$")


def read(folder: Path) -> dict[str, dict[int, tuple[float, float]]]:
    """config -> round -> (mean, best) in us, for runs whose case 0 passed."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for path in sorted(folder.glob("*.json")):
        m = NAME.match(path.stem)
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            doc = None
        if not m or not isinstance(doc, dict):
            continue
        case = next((c for c in doc.get("cases", []) if c.get("case_idx") == 0 and c.get("passed")), None)
        if case and case.get("mean_us") is not None and case.get("best_us") is not None:
            out.setdefault(m["config"], {})[int(m["round"])] = (float(case["mean_us"]), float(case["best_us"]))
    return out


def table(results: dict[str, dict[int, tuple[float, float]]]) -> str:
    lines = ["| configuration | means (us), by round | best (us), by round | median mean | median best |",
             "|---|---|---|---|---|"]  # fmt: skip
    for config, rounds in results.items():
        means = [rounds[k][0] for k in sorted(rounds)]
        bests = [rounds[k][1] for k in sorted(rounds)]
        lines.append(f"| {config} | {' / '.join(f'{v:.1f}' for v in means)} | {' / '.join(f'{v:.1f}' for v in bests)} "
                     f"| {statistics.median(means):.1f} | {statistics.median(bests):.1f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    results = read(Path(argv[0]))
    print(table(results) if results else "no passed run of case 0")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
