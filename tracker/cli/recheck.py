"""`recheck RUN [--case N]`: judge the evidence kept for a run's failed checks again with the plain reference
gates (tracker/workloads/qr_v2/reference_gates.py), on the CPU, and say who was wrong: the kernel (the reference
fails its output too) or the tracker's checker (the reference passes what was recorded as failed).

Exit codes: 0 the reference agrees with every recorded failure, 1 it disagrees on at least one, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from tracker.capture.evidence import MAX_ELEMENTS, RESIDUAL_KEYS, unpack
from tracker.cli.common import UsageError, resolve
from tracker.common.errors import InputError
from tracker.common.jsonfields import clean
from tracker.store import Store

KERNEL_WRONG = "the kernel's output is wrong"
CHECKER_DISAGREED = "the tracker's checker disagreed"
NOT_RECHECKED = "not rechecked: no matrix was kept (the output's structure was wrong)"


def recheck_case(row: dict[str, Any], blob: bytes | None) -> dict[str, Any]:
    """Judge one case's evidence again; returns the report entry."""
    entry = {
        "case_idx": int(row["case_idx"]),
        "repetition": clean(row["repetition"]),
        "input_idx": clean(row["input_idx"]),
        "matrix_idx": clean(row["matrix_idx"]),
        "n": clean(row["n"]),
        "recorded_message": row["message"],
        "recorded_residuals": {k: clean(row[k]) for k in RESIDUAL_KEYS},
    }
    try:
        arrays = unpack(blob) if blob else {}
    except ValueError as exc:  # an imported blob that is no evidence of ours, or a zip bomb: refused unread
        raise InputError(f"case {entry['case_idx']}: {exc}") from None
    if not {"a", "h", "tau"} <= arrays.keys():
        return {**entry, "reference": None, "conclusion": NOT_RECHECKED, "agrees": True}
    odd = [k for k in ("a", "h", "tau") if getattr(arrays[k], "dtype", None) != "float32"]
    if odd:  # an imported blob can hold any dtype numpy knows (text, complex): no matrix of a run of ours
        raise InputError(f"case {entry['case_idx']}: the evidence's {', '.join(odd)} are not float32 arrays")
    a, h, tau = (arrays[k] for k in ("a", "h", "tau"))
    if a.ndim != 2 or min(a.shape) == 0 or h.shape != a.shape or tau.shape != (min(a.shape),):
        raise InputError(f"case {entry['case_idx']}: the evidence's shapes (a {a.shape}, h {h.shape}, tau "
                         f"{tau.shape}) are not one matrix, its H and its tau")  # fmt: skip
    if a.size + h.size + tau.size > MAX_ELEMENTS:  # the unpack cap is sized for float64: float32 got twice as far
        raise InputError(f"case {entry['case_idx']}: the evidence holds a larger matrix than a run keeps")
    import torch  # after the evidence is read: a refused blob costs no torch import

    from tracker.workloads.qr_v2.reference_gates import judge

    a, h, tau = (torch.from_numpy(arrays[k].copy()).unsqueeze(0) for k in ("a", "h", "tau"))
    verdict = judge(a, (h, tau))
    reference = {
        "passed": verdict.passed,
        "gate": verdict.gate,
        "message": verdict.message,
        "residuals": {k: (None if math.isnan(v) else v) for k, v in verdict.residuals.items()},
    }
    conclusion = CHECKER_DISAGREED if verdict.passed else KERNEL_WRONG
    return {**entry, "reference": reference, "conclusion": conclusion, "agrees": not verdict.passed}


def cmd_recheck(args: argparse.Namespace) -> int:
    run_id = resolve(args.store, args.run)
    rows = Store(args.store).run_evidence(run_id, case_idx=args.case).to_dict("records")
    if args.case is not None and not rows:
        raise UsageError(f"run {run_id} kept no evidence for case {args.case}")
    report = [recheck_case(row, Store(args.store).evidence_arrays(run_id, int(row["case_idx"]))) for row in rows]
    disagreed = [r for r in report if not r["agrees"]]
    if args.json:
        print(json.dumps({"run_id": run_id, "cases": report, "checker_disagreed": len(disagreed)}))
    elif not report:
        print(f"run {run_id}: no evidence kept (no check failed with a matrix to blame)")
    for r in report if not args.json else []:
        where = "untimed first pass" if r["repetition"] == -1 else f"repetition {r['repetition']}"
        print(f"case {r['case_idx']} ({where}, input {r['input_idx']}, matrix {r['matrix_idx']}, n={r['n']})")
        print(f"  recorded:  {r['recorded_message']}")
        if r["reference"] is not None:
            res = ", ".join(f"{k} {v:.3g}" for k, v in r["reference"]["residuals"].items() if v is not None)
            verdict = "pass" if r["reference"]["passed"] else f"FAIL ({r['reference']['message']})"
            print(f"  reference: {verdict}; {res}")
        print(f"  -> {r['conclusion']}")
    return 1 if disagreed else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "recheck", parents=[common], help="judge a run's failure evidence again with the reference gates"
    )
    p.add_argument("run", help="run id (or unique prefix) whose kept evidence to judge again")
    p.add_argument("--case", type=int, help="only this case")
    p.set_defaults(func=cmd_recheck)
