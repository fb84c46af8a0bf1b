"""Paired screen of kernel variants: scripts/qr_devbench.py in a fresh process per variant and round, the order
rotated each round, each variant judged by its per-round ratios to the baseline of the same round.

Why: 640x512 is bimodal between processes (std 250-560 us on a 6.5 ms mean), so one devbench process with every
variant in it ranked two screen leaders that then lost in full (sessions 24 and 25). Here the process is what
varies from round to round, and pairing by round cancels the machine's drift; nothing is recorded.

    python3 scripts/paired_screen.py --cases 3,4 --reps 10 --rounds 4 kernels/fused_wy.py \
        'kernels/fused_wy.py@_FUSED_BN=32,_FUSED_WARPS=8'

The first variant is the baseline. Per variant and case: the geometric mean of the per-round ratios of the means
(and of the bests), their range, and how many rounds it was faster; --json writes it all.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

DEVBENCH = Path(__file__).resolve().parent / "qr_devbench.py"


def round_order(variants: list[str], k: int) -> list[str]:
    """Round k's order: the list rotated by k, so no variant always runs first (or right after the baseline)."""
    s = k % len(variants)
    return variants[s:] + variants[:s]


def summarise(rounds: list[dict[str, list[dict]]], variants: list[str]) -> list[dict]:
    """Per non-baseline variant and case: per-round ratios to the baseline (means and bests), their geometric
    mean and range, and the rounds where the variant was faster. Rounds where either side failed or has no
    timing are left out of that case."""
    base, out = variants[0], []
    for spec in variants[1:]:
        cases: dict[int, dict] = {}
        for doc in rounds:
            if spec not in doc or base not in doc:
                continue
            base_rows = {r["case"]: r for r in doc[base]}
            for row in doc[spec]:
                b = base_rows.get(row["case"])
                if (
                    b is None
                    or not (row["ok"] and b["ok"])
                    or not all(
                        math.isfinite(x) and x > 0 for x in (row["mean_us"], b["mean_us"], row["best_us"], b["best_us"])
                    )
                ):
                    continue
                c = cases.setdefault(row["case"], {"shape": row["shape"], "mean": [], "best": []})
                c["mean"].append(row["mean_us"] / b["mean_us"])
                c["best"].append(row["best_us"] / b["best_us"])
        for case, c in sorted(cases.items()):
            gm = {k: math.exp(sum(map(math.log, c[k])) / len(c[k])) for k in ("mean", "best")}
            out.append({
                "variant": spec, "case": case, "shape": c["shape"], "rounds": len(c["mean"]),
                "mean_ratio": gm["mean"], "mean_low": min(c["mean"]), "mean_high": max(c["mean"]),
                "best_ratio": gm["best"], "faster_rounds": sum(r < 1 for r in c["mean"]),
            })  # fmt: skip
    return out


def run_round(k: int, variants: list[str], args: argparse.Namespace, folder: Path) -> dict[str, list[dict]]:
    """One round: each variant in its own devbench process; what each wrote (a failed process: nothing)."""
    doc: dict[str, list[dict]] = {}
    for spec in round_order(variants, k):
        out = folder / f"r{k}_{variants.index(spec)}.json"
        cmd = [sys.executable, str(DEVBENCH), spec, "--suite", "bench", "--reps", str(args.reps), "--json", str(out)]
        if args.cases:
            cmd += ["--cases", args.cases]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0 or not out.exists():
            print(f"round {k + 1}: {spec} failed (rc {proc.returncode}): {proc.stderr.strip()[-300:]}", flush=True)
            continue
        doc.update(json.loads(out.read_text()))
        means = " ".join(f"{r['case']}:{r['mean_us']:.0f}" for r in doc[spec])
        print(f"round {k + 1}/{args.rounds}: {spec} {means}", flush=True)
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="+", help="PATH[@KNOB=VALUE,...]; the first is the baseline")
    ap.add_argument("--cases", default="", help="benchmark case numbers, e.g. 3,4 (default: all)")
    ap.add_argument("--reps", type=int, default=10, help="repetitions per case and process (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per process (default %(default)s)")
    ap.add_argument("--json", default="", help="write the rounds and the summary here")
    args = ap.parse_args(argv)
    if len(args.variants) < 2 or args.rounds < 1:
        ap.error("a baseline, at least one variant and at least one round")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="kb-paired-") as tmp:
        for k in range(args.rounds):
            rounds.append(run_round(k, args.variants, args, Path(tmp)))
    rows = summarise(rounds, args.variants)
    print(f"\nbaseline {args.variants[0]}; ratio = variant / baseline per round, geometric mean over rounds")
    for r in rows:
        print(
            f"{r['variant']}  case {r['case']} {r['shape']}: mean {r['mean_ratio']:.4f} "
            f"({r['mean_low']:.4f}..{r['mean_high']:.4f}), best {r['best_ratio']:.4f}, "
            f"faster in {r['faster_rounds']}/{r['rounds']} rounds"
        )
    if not rows:
        print("no timed case on both sides (no GPU, or every round failed)")
    if args.json:
        Path(args.json).write_text(json.dumps({"variants": args.variants, "rounds": rounds, "summary": rows}))
    return 0 if all(len(doc) == len(args.variants) for doc in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
