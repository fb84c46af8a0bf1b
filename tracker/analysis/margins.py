"""Gate margins: how close a variant runs to each numeric gate. Per case the worst scaled residual over every run
and seed of the variant, against the gate's tolerance; a variant within a factor NEAR of a gate is flagged (it
passes today and may fail on a hidden seed)."""

from __future__ import annotations

from typing import Any

from tracker.common.lazy import pd
from tracker.workloads import gate_tolerances

NEAR = 2.0
# A worst residual moves by a few percent from seed to seed; a quarter more on the same cases is the code's doing.
CLOSER = 1.25


def gate_margins(residuals: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """From Store.gate_residuals: per variant sha256 {cases: [{case, case_idx, gate, worst, tolerance, ratio,
    runs}], closest: the entry of highest ratio, near: closest ratio >= 1/NEAR}. Gates without a residual (a
    problem folder's checks) are left out."""
    out: dict[str, dict[str, Any]] = {}
    for row in residuals.to_dict("records"):
        for gate, tol in gate_tolerances(row["problem"]).items():
            worst = row.get(gate)
            if worst is None or pd.isna(worst):
                continue
            entry = {"case": row["label"], "case_idx": int(row["case_idx"]), "gate": gate, "worst": float(worst),
                     "tolerance": tol, "ratio": float(worst) / tol, "runs": int(row["runs"])}  # fmt: skip
            out.setdefault(row["variant_sha256"], {"cases": []})["cases"].append(entry)
    for m in out.values():
        m["closest"] = max(m["cases"], key=lambda c: c["ratio"])
        m["near"] = m["closest"]["ratio"] >= 1 / NEAR
    return out


def closest_text(closest: dict[str, Any]) -> str:
    """A variant's closest gate in one sentence: within NEAR of it, or over it (a run or seed failed it: no near
    miss)."""
    gate = closest["gate"].removesuffix("_res")
    where = (f"on {closest['case']} the worst scaled residual over {closest['runs']} run(s) of this variant is "
             f"{closest['worst']:.3g} of {closest['tolerance']:g}")  # fmt: skip
    if closest["ratio"] > 1:
        return f"Over the {gate} gate: {where} ({closest['ratio']:.2g}x the tolerance; a run failed it)."
    return f"Within {NEAR:g}x of the {gate} gate: {where} ({closest['ratio']:.0%} of the tolerance)."


def closer_than_parent(parents: pd.DataFrame, margins: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs (from Store.run_parents) whose variant runs closer to a gate than its parent's variant does, on the
    cases both were checked on: per gate, the child's highest ratio at least CLOSER times the parent's. One entry per
    variant and gate, with its latest run (margins are the variant's, over all its runs)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for r in parents.to_dict("records"):
        child, parent = margins.get(r["variant_sha256"]), margins.get(r["parent_sha256"])
        if child is None or parent is None or r["variant_sha256"] == r["parent_sha256"]:
            continue
        theirs = {(c["gate"], c["case"]): c["ratio"] for c in parent["cases"]}
        for gate in sorted({c["gate"] for c in child["cases"]}):
            shared = [c for c in child["cases"] if (gate, c["case"]) in theirs and c["gate"] == gate]
            if not shared:
                continue
            mine = max(shared, key=lambda c: c["ratio"])
            before = max(theirs[(gate, c["case"])] for c in shared)
            if mine["ratio"] >= CLOSER * before:
                found[(r["variant_sha256"], gate)] = {
                    "run_id": r["run_id"], "variant": r["variant"], "parent_variant": r["parent_variant"], "gate": gate,
                    "case": mine["case"], "ratio": mine["ratio"], "parent_ratio": before,
                }  # fmt: skip
    return list(found.values())
