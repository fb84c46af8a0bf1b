"""Number formatting and table shaping for the dashboard pages. Pure functions: no Streamlit, no store access.

Pages read through tracker.store.Store, pass the frames here, and render what comes back. Statistics input lives
in tracker.analysis, Plotly figures in pages.ui.charts, source diffs in pages.ui.diffs.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from tracker.analysis.series import is_num
from tracker.analysis.stats import RunComparison
from tracker.common.jsonfields import parse_flags, stalls_text
from tracker.common.text import short_kernel
from tracker.workloads import no_geomean, suite_size

# ------------------------------------------------------------------------------------------------ numbers


def flops_per_matrix(n: float) -> float:
    """Flops of a Householder QR of one n x n matrix: 4/3 n^3 + 2 n^2 + 14 n / 3."""
    return 4.0 / 3.0 * n**3 + 2.0 * n**2 + 14.0 * n / 3.0


def gflops(batch: float | None, n: float | None, mean_us: float | None) -> float | None:
    """GFLOP/s of one call on `batch` matrices of size n that took `mean_us` microseconds."""
    if not is_num(batch) or not is_num(n) or not is_num(mean_us) or mean_us <= 0:
        return None
    return batch * flops_per_matrix(n) / (mean_us * 1e3)


def _gflops(case: dict, mean_us: float | None) -> float | None:
    if is_num(case.get("flops")):
        return case_rate(case, mean_us, "flops")
    return gflops(case.get("batch"), case.get("n"), mean_us)  # runs from before workloads recorded their work


def case_rate(case: dict, mean_us: float | None, key: str) -> float | None:
    """Work per microsecond / 1e3 (GFLOP/s or GB/s) from the workload's recorded work (`flops` or `bytes`)."""
    work = case.get(key)
    if not is_num(work) or not is_num(mean_us) or mean_us <= 0:
        return None
    return work / (mean_us * 1e3)


def fmt_us(x: Any) -> str:
    if not is_num(x):
        return "–"
    x = float(x)
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def short(run_id: Any) -> str:
    return str(run_id)[:12] if is_num(run_id) else ""


def short_commit(commit: Any) -> str:
    """A git commit as every page shows it: git's own short form (7 characters; some runs record no more)."""
    return commit[:7] if isinstance(commit, str) and commit else "–"


HEADERS = {"run_id": "run", "baseline_run": "baseline run", "started_at": "started", "created_at": "recorded",
           "gpu": "GPU", "factor": "× slower", "best_before_us": "best before (µs)"}  # fmt: skip


def run_choice(row: Mapping[str, Any], *, when: bool = False) -> str:
    """One run as a picker lists it: id, name (path), status, suite/mode, GPU ("no GPU" for a run without one,
    not a float NaN from the frame) and, with `when`, its start."""
    gpu, path = row.get("gpu"), row.get("path")
    gpu = gpu if isinstance(gpu, str) and gpu else "no GPU"
    path = path if isinstance(path, str) and path else "?"
    text = f"{row['run_id']} · {row['variant']} ({path}) · {row['status']} · {row['suite']}/{row['mode']} · {gpu}"
    return text + (f" · {row['started_at']:%Y-%m-%d %H:%M}" if when else "")


def round_times(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Times (float columns with a "(µs)" header) to 0.1 µs, in a copy, and which columns they are."""
    cols = [c for c in df.columns if str(c).endswith("(µs)") and pd.api.types.is_float_dtype(df[c])]
    return (df.assign(**{c: df[c].round(1) for c in cols}) if cols else df), cols


def readable(df: pd.DataFrame) -> pd.DataFrame:
    """A frame of stored columns as a person reads it: headers in words with the unit (`geomean_us` is
    "geomean (µs)"; round_times rounds those where the table is drawn), ratios to 3 decimals. Values stay
    numbers, so columns still sort."""
    out = df.copy()
    for col in out.columns:
        if col == "factor" and pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].round(3)
    names = {c: HEADERS.get(c) or (c.removesuffix("_us").replace("_", " ") + " (µs)" if c.endswith("_us")
                                   else c.replace("_", " ")) for c in out.columns}  # fmt: skip
    return out.rename(columns=names)


# -------------------------------------------------------------------------------------------- experiments


def flag_icon(flags_json: Any) -> str:
    """'⚠ timer-patch, identity-cache' for the static-scan flags of a run (hack ones), 'ℹ' for informational only."""
    flags, _ = parse_flags(flags_json)
    hacks = sorted({f["code"] for f in flags if f.get("severity", "hack") == "hack"})
    if hacks:
        return "⚠ " + ", ".join(hacks)
    return "ℹ" if flags else ""


def experiments_table(df: pd.DataFrame) -> pd.DataFrame:
    """The Experiments grid: one row per variant and context, with link columns to the runs."""
    out = pd.DataFrame(
        {
            "variant": df["variant"],
            "path": df["path"],
            "sha": df["variant_sha256"].str[:8],
            "family": df["family"],
            "problem": df.get("problem"),
            "suite": df["suite"],
            "GPU": df["gpu"],
            "best geomean (µs)": df["best_geomean_us"],
            "best run": ["run?id=" + r if isinstance(r, str) else None for r in df["best_run"]],
            "latest": df["latest_status"].map(lambda s: "pass" if s == "passed" else s),
            "latest geomean (µs)": df["latest_geomean_us"],
            "latest run": ["run?id=" + r for r in df["latest_run"]],
            "runs": df["runs"],
            "passed": df["passed"],
            "last run": df["last_run_at"],
            "verdict": df["verdict"],
            "flags": [flag_icon(f) for f in df.get("latest_flags", pd.Series([None] * len(df)))],
            "note": [
                n if isinstance(n, str) else (r if isinstance(r, str) else None)
                for n, r in zip(df["note"], df["verdict_reason"], strict=True)
            ],
        }
    )
    if out["problem"].nunique(dropna=False) <= 1:  # one problem: the column says nothing
        out = out.drop(columns="problem")
    return out.reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------- run


INTERRUPTED = ("timeout", "crashed", "cancelled")  # a run stopped in a case: that case is unfinished, not failed


def unfinished(case: Mapping[str, Any], run: Mapping[str, Any]) -> bool:
    """The case a run was in when it was stopped: the runner records it not passed, with the run's error."""
    return run.get("status") in INTERRUPTED and not case["passed"] and case.get("message") == run.get("error")


def run_progress(run: Mapping[str, Any], cases: pd.DataFrame) -> dict[str, Any]:
    """What the Run page says about how far a run got: passed cases out of those it was to run (the suite's, for
    a run stopped before its end), a line on where it stopped or which part of the suite it ran, and why it has
    no geomean (workloads.no_geomean, the rule the runner applies)."""
    records = cases.to_dict("records")
    suite = suite_size(run.get("problem"), run["suite"], run["mode"])
    passed, recorded = sum(bool(c["passed"]) for c in records), len(records)
    stopped = [c for c in records if unfinished(c, run)]
    lines = []
    of = recorded
    if stopped:
        at = stopped[0]
        lines.append(f"{run['status'].capitalize()} during case {at['case_idx']} ({at['spec']}): inconclusive, not a "
                     "failure")  # fmt: skip
    if run.get("status") in INTERRUPTED and suite is not None and recorded < suite:
        of = suite  # the cases it never reached count too (a run stopped before its end)
        lines.append(f"{recorded} of the suite's {suite} cases reached")
    elif suite is not None and recorded != suite:
        ran = ", ".join(str(c["case_idx"]) for c in records[:12]) + (", …" if recorded > 12 else "")
        lines.append(f"Cases {ran} of the suite's {suite}")
    why = None
    if not is_num(run.get("geomean_us")):
        all_timed = all(is_num(c.get("mean_us")) for c in records)
        why = no_geomean(run["mode"], run["status"], recorded, suite, all_timed) or "not recorded"
    return {"passed": passed, "of": of, "line": "; ".join(lines), "no_geomean": why}


TIMING_SHOWN = ("mean ± err (µs)", "mean (µs)", "best (µs)", "worst (µs)", "GFLOP/s", "GB/s", "runs")


def run_case_table(cases: pd.DataFrame, run: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The Run page's per-case table: mean ± err, best, worst, GFLOP/s, pass/fail (or the run's status for the
    case it was stopped in), scaled residuals."""
    rows = []
    for c in cases.to_dict("records"):
        mean, err = c.get("mean_us"), c.get("err_us")
        ok = "pass" if c["passed"] else (run["status"] if run is not None and unfinished(c, run) else "FAIL")
        rows.append(
            {
                "#": c["case_idx"],
                "case": c["spec"],
                "ok": ok,
                "mean ± err (µs)": f"{fmt_us(mean)} ± {fmt_us(err)}" if is_num(mean) else "–",
                "mean (µs)": mean if is_num(mean) else None,
                "best (µs)": c.get("best_us") if is_num(c.get("best_us")) else None,
                "worst (µs)": c.get("worst_us") if is_num(c.get("worst_us")) else None,
                "GFLOP/s": _gflops(c, mean),
                "GB/s": case_rate(c, mean, "bytes"),
                "runs": c.get("runs") if is_num(c.get("runs")) else None,
                "factor res": c.get("factor_res"),
                "tril res": c.get("tril_res"),
                "recon res": c.get("recon_res"),
                "orth res": c.get("orth_res"),
                "message": c.get("message") or "",
            }
        )
    out = pd.DataFrame(rows)
    if not out["mean (µs)"].notna().any():  # a test-mode run, or none timed: no columns that stay empty
        return _with_gpu_state(out.drop(columns=list(TIMING_SHOWN)), cases)
    if "GB/s" in out and out["GB/s"].isna().all():  # runs that recorded no bytes moved (older runs)
        out = out.drop(columns="GB/s")
    rates = [c for c in ("GFLOP/s", "GB/s") if c in out]
    # shown "localized": 17,927.3 with separators, as the times; below 1, two significant digits (a CPU's 0.041
    # GB/s read "0")
    out[rates] = out[rates].astype(float).map(lambda v: round(v, 1) if not v < 1 else float(f"{v:.2g}"))
    return _with_gpu_state(out, cases)


GPU_STATE_SHOWN = (("sm_mhz", "SM MHz"), ("mem_mhz", "mem MHz"), ("power_w", "power W"), ("temp_c", "temp °C"))


def _with_gpu_state(out: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """The GPU's state over each case's timed loop, after the timings: median (min-max), and throttle reasons.
    Left out for runs without it (CPU, no NVML, older runs)."""
    if "gpu_samples" not in cases or not cases["gpu_samples"].map(is_num).any():
        return out
    at = list(out.columns).index("runs") + 1 if "runs" in out else len(out.columns)
    for q, name in reversed(GPU_STATE_SHOWN):
        out.insert(at, name, [
            f"{c[q + '_median']:,.0f} ({c[q + '_min']:,.0f}-{c[q + '_max']:,.0f})" if is_num(c.get(q + "_median"))
            else "–" for c in cases.to_dict("records")
        ])  # fmt: skip
    out.insert(at + len(GPU_STATE_SHOWN), "throttle", [
        (c.get("throttle") or "none") if isinstance(c.get("throttle"), str) else "–" for c in cases.to_dict("records")
    ])  # fmt: skip
    return out


def evidence_table(evidence: pd.DataFrame) -> pd.DataFrame:
    """The kept evidence of failed checks, one row per case: where it failed and that matrix's residuals."""
    rep = evidence["repetition"].map(lambda r: "first (untimed)" if r == -1 else f"{int(r)}" if is_num(r) else "-")
    return pd.DataFrame(
        {
            "case": evidence["case_idx"],
            "repetition": rep,
            "input": evidence["input_idx"],
            "matrix": evidence["matrix_idx"],
            "n": evidence["n"],
            "factor res": evidence["factor_res"],
            "orth res": evidence["orth_res"],
            "tril res": evidence["tril_res"],
            "recon res": evidence["recon_res"],
            "message": evidence["message"],
            "kept (bytes)": evidence["arrays_bytes"],
        }
    )


def profile_tables(profile_cases: pd.DataFrame, profile_kernels: pd.DataFrame, top: int = 15) -> dict[str, Any]:
    """Top kernels over all profiled cases (a short name first, the full one last), and launches / host time per
    case."""
    kernels = pd.DataFrame(columns=["kernel", "calls", "device (µs)", "self (µs)", "full name"])
    if not profile_kernels.empty:
        agg = profile_kernels.groupby("kernel", dropna=False).agg(
            calls=("calls", "sum"), device_us=("device_us", "sum"), self_us=("self_us", "sum")
        )
        key = "device_us" if agg["device_us"].fillna(0).gt(0).any() else "self_us"
        agg = agg.sort_values(key, ascending=False).head(top).reset_index()
        kernels = pd.DataFrame({
            "kernel": agg["kernel"].map(short_kernel), "calls": agg["calls"], "device (µs)": agg["device_us"].round(1),
            "self (µs)": agg["self_us"].round(1), "full name": agg["kernel"],
        })  # fmt: skip
    per_case = profile_cases.rename(columns={"case_idx": "#", "host_us": "host (µs)", "device_us": "device (µs)"})
    per_case = per_case.round({"host (µs)": 1, "device (µs)": 1})
    if "trace_path" in per_case:  # the recording machine's absolute path means nothing here: its file name
        per_case = per_case.drop(columns="trace_path").assign(
            **{
                "trace file": profile_cases["trace_path"].map(
                    lambda p: p.rsplit("/", 1)[-1] if isinstance(p, str) else ""
                )
            }
        )
    return {"kernels": kernels, "cases": per_case}


HOVER_TABLE_CSS = """<style>
table.kb-hover {border-collapse: collapse; font-size: 14px; width: 100%;}
table.kb-hover th {text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; font-weight: 600;}
table.kb-hover td {padding: 3px 8px; border-bottom: 1px solid #f0f0f0; white-space: nowrap;}
table.kb-hover td.kb-num {text-align: right; font-variant-numeric: tabular-nums;}
table.kb-hover td[title] {cursor: help; text-decoration: underline dotted #999;}
</style>"""


def hover_table_html(df: pd.DataFrame, titles: Mapping[str, str]) -> str:
    """df as an HTML table in which each cell of a column in `titles` shows the other column's text on hover (the
    browser's own tooltip: a dataframe cell has none), that other column left out. For short kernel names whose
    whole C++ signature runs to hundreds of characters."""
    shown = [c for c in df.columns if c not in set(titles.values())]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown)
    rows = []
    for rec in df.to_dict("records"):
        cells = []
        for c in shown:
            value = rec[c]
            if c in titles:
                tip = html.escape(str(rec[titles[c]]), quote=True)
                cells.append(f'<td title="{tip}">{html.escape(str(value))}</td>')
            elif is_num(value):
                cells.append(f'<td class="kb-num">{value:,.1f}</td>' if isinstance(value, float) else
                             f'<td class="kb-num">{value:,}</td>')  # fmt: skip
            else:  # text, or a blank where a value is missing
                cells.append(f"<td>{'' if pd.isna(value) else html.escape(str(value))}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f'{HOVER_TABLE_CSS}<table class="kb-hover"><tr>{head}</tr>{"".join(rows)}</table>'


def fmt_time(value: Any) -> str:
    """A timestamp to the second, `2026-12-01 12:26:18`; blank when missing."""
    try:
        return "" if value is None or pd.isna(value) else f"{pd.Timestamp(value):%Y-%m-%d %H:%M:%S}"
    except (TypeError, ValueError):
        return str(value)


def ncu_table(ncu_kernels: pd.DataFrame) -> pd.DataFrame:
    """Nsight Compute's kernels, one row each in launch order per case, with the top stall reasons as text."""
    df = ncu_kernels
    smem = df["static_smem_bytes"].fillna(0).astype("int64") + df["dynamic_smem_bytes"].fillna(0).astype("int64")
    return pd.DataFrame(
        {
            "case": df["case_idx"],
            "#": df["kernel_idx"],
            "kernel": df["kernel"].map(short_kernel),
            "duration (µs)": df["duration_us"],
            "occupancy %": df["occupancy_pct"],
            "SM %": df["sm_pct"],
            "memory %": df["memory_pct"],
            "regs/thread": df["registers"],
            "smem/block (B)": smem,
            "block": df["block_size"],
            "grid": df["grid_size"],
            "top stalls (cycles per issue)": [stalls_text(s) for s in df["stalls"]],
            "full name": df["kernel"],
        }
    )


def environment_rows(run: Mapping[str, Any]) -> pd.DataFrame:
    keys = ("host", "device", "gpu", "sm_count", "driver", "cuda", "torch", "triton", "python", "seed", "trigger",
            "pid", "started_at", "finished_at")  # fmt: skip
    rows = []
    for k in keys:
        v = run.get(k)
        text = fmt_time(v) if k.endswith("_at") else (str(v) if is_num(v) else "")
        rows.append({"field": k.replace("_", " "), "value": text})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ compare


def _by_label(bundle: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """value(case) per case label of a run bundle (labels as analysis.samples_by_case makes them unique)."""
    out: dict[str, Any] = {}
    for c in bundle["cases"].to_dict("records"):
        label = c.get("label") or c["spec"]
        out[label if label not in out else f"{label} #{c['case_idx']}"] = value(c)
    return out


def err_by_label(bundle: Mapping[str, Any]) -> dict[str, float | None]:
    """Standard error per case label of a run bundle."""
    return _by_label(bundle, lambda c: c.get("err_us") if is_num(c.get("err_us")) else None)


def compare_table(cmp: RunComparison, a: Mapping[str, Any], b: Mapping[str, Any]) -> pd.DataFrame:
    """Per case, side by side: mean ± err of A and B, ratio B/A with its CI, p value, mark and verdict."""
    err_a, err_b = err_by_label(a), err_by_label(b)
    rows = []
    for c in cmp.cases:
        ea, eb = err_a.get(c.case), err_b.get(c.case)
        rows.append(
            {
                "case": c.case,
                "A mean ± err (µs)": f"{fmt_us(c.mean_a)} ± {fmt_us(ea)}" if c.mean_a is not None else "–",
                "B mean ± err (µs)": f"{fmt_us(c.mean_b)} ± {fmt_us(eb)}" if c.mean_b is not None else "–",
                "ratio B/A": c.ratio,
                "95% CI": f"{c.ci_low:.3f} – {c.ci_high:.3f}" if c.ci_low is not None else "–",
                "p": c.p_value,
                "mark": c.mark,
                "verdict": c.verdict,
                "why": c.reason,
            }
        )
    out = pd.DataFrame(rows)
    if "test" in (a["run"].get("mode"), b["run"].get("mode")):  # untimed: what each side passed is the comparison
        for side, bundle in (("A", a), ("B", b)):
            ok = _by_label(bundle, lambda c: "pass" if c["passed"] else "FAIL")
            out.insert(1 + (side == "B"), f"{side} ok", [ok.get(c.case, "") for c in cmp.cases])
    return out
