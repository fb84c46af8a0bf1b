"""Validate the statistics on recorded runs: A/A false positives, planted-regression power, history change point.

The runs are recorded on the GPU by scripts/h200_final.sh (family `stats-validation`: A runs of the reference
kernel, then B runs of validation/planted_regression.py, which slows one case). This script only reads a store:

    python scripts/validate_stats.py --store experiments.duckdb --planted-case "40x176 c1 dense"
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.analysis.series import case_data, detect_all, history_points  # noqa: E402
from tracker.analysis.stats import compare_runs  # noqa: E402
from tracker.store import Store  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="experiments.duckdb")
    parser.add_argument("--family", default="stats-validation")
    parser.add_argument("--base", default="geqrf_reference", help="variant name of the A runs")
    parser.add_argument("--planted", default="planted_regression", help="variant name of the B runs")
    parser.add_argument(
        "--planted-note", default="", help="only B runs whose note contains this (e.g. '+2%%'), for several plants"
    )
    parser.add_argument("--planted-case", required=True, help='label of the slowed case, e.g. "40x176 c1 dense"')
    parser.add_argument("--min-effect", type=float, default=0.02)
    args = parser.parse_args()

    contexts = Store(args.store).history_contexts(family=args.family)
    if contexts.empty:
        print(f"no timed runs of family {args.family!r} in {args.store}")
        return 1
    suite, gpu = contexts.iloc[0]["suite"], contexts.iloc[0]["gpu"]
    hist = Store(args.store).case_history(family=args.family, suite=suite, gpu=gpu, last=None)
    runs = hist["runs"]
    a_ids = list(runs.loc[runs["variant"] == args.base, "run_id"])
    planted = (runs["variant"] == args.planted) & runs["note"].fillna("").str.contains(args.planted_note, regex=False)
    b_ids = list(runs.loc[planted, "run_id"])
    keep = set(a_ids) | set(b_ids)  # the history of this plant alone: baseline runs, then its planted runs
    hist = {name: frame[frame["run_id"].isin(keep)].reset_index(drop=True) for name, frame in hist.items()}
    runs = hist["runs"]
    bundles = {r: Store(args.store).run_bundle(r) for r in a_ids + b_ids}
    data = {r: case_data(b) for r, b in bundles.items()}
    print(f"{len(a_ids)} A runs ({args.base}), {len(b_ids)} B runs ({args.planted}), suite {suite}, GPU {gpu}")

    def flagged(pairs):
        counts: dict[str, list[int]] = {}
        for x, y in pairs:
            cmp = compare_runs(data[x], data[y], gpu_a=gpu, gpu_b=gpu, min_effect=args.min_effect)
            for c in cmp.cases:
                hit, total = counts.setdefault(c.case, [0, 0])
                counts[c.case] = [hit + (c.verdict in ("faster", "slower")), total + 1]
        return counts

    aa = flagged(itertools.combinations(a_ids, 2))
    hits = sum(h for h, _ in aa.values())
    total = sum(t for _, t in aa.values())
    print(
        f"\nA/A: {len(a_ids) * (len(a_ids) - 1) // 2} pairs x {len(aa)} cases: {hits}/{total} flagged "
        f"({100 * hits / max(total, 1):.1f}%; must be <= 1%)"
    )
    for case, (h, t) in aa.items():
        print(f"  {case:24} {h}/{t} flagged")

    ab = flagged(itertools.product(a_ids, b_ids))
    print(f"\nPlanted (A vs B, {len(a_ids) * len(b_ids)} pairings):")
    for case, (h, t) in ab.items():
        want = ">= 95% slower" if case == args.planted_case else "<= 1% flagged"
        print(f"  {case:24} {h}/{t} flagged ({100 * h / max(t, 1):.1f}%; must be {want})")
    effects = []
    for x, y in itertools.product(a_ids, b_ids):
        ma = data[x][args.planted_case].samples
        mb = data[y][args.planted_case].samples
        effects.append(sum(mb) / len(mb) / (sum(ma) / len(ma)) - 1)
    print(
        f"  planted effect on {args.planted_case}: mean {100 * sum(effects) / len(effects):+.2f}% "
        f"(range {100 * min(effects):+.2f}% .. {100 * max(effects):+.2f}%)"
    )

    changes = detect_all(history_points(hist))
    print(f"\nHistory: {len(runs)} runs in time order; change points:")
    found = [(case, cp) for case, cps in changes.items() for cp in cps]
    for case, cp in found:
        print(
            f"  {case:24} {cp.kind} at run #{cp.index} ({cp.run_id}): {cp.before:,.1f} -> {cp.after:,.1f} us "
            f"(x{cp.factor:.3f})"
        )
    first_b = next((i for i, v in enumerate(runs["variant"]) if v == args.planted), None)
    exact = len(found) == 1 and found[0][0] == args.planted_case and found[0][1].index == first_b
    print(f"  expected exactly one, on {args.planted_case} at run #{first_b}: {'yes' if exact else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
