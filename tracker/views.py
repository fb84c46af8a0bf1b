"""Data shaping and Plotly figures for the dashboard pages. Pure functions: no Streamlit, no store access.

Pages read through tracker.queries, pass the frames here, and render what comes back.
"""

from __future__ import annotations

import difflib
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from tracker.stats import CaseData, ChangePoint, HistoryPoint, RunComparison, compare_runs, detect_changes

MARK_TEXT = {"-": "faster", "+": "slower", "~": "same", "x": "n/a"}
MARK_COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#9e9e9e", "n/a": "#c7c7c7"}
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
TIME_AXIS = {"type": "log", "title": {"text": "time (µs, log)"}}


# ------------------------------------------------------------------------------------------------ numbers


def flops_per_matrix(n: float) -> float:
    """Flops of a Householder QR of one n x n matrix: 4/3 n^3 + 2 n^2 + 14 n / 3."""
    return 4.0 / 3.0 * n**3 + 2.0 * n**2 + 14.0 * n / 3.0


def gflops(batch: float | None, n: float | None, mean_us: float | None) -> float | None:
    """GFLOP/s of one call on `batch` matrices of size n that took `mean_us` microseconds."""
    if not is_num(batch) or not is_num(n) or not is_num(mean_us) or mean_us <= 0:
        return None
    return batch * flops_per_matrix(n) / (mean_us * 1e3)


def is_num(x: Any) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x)) and not pd.isna(x)


def fmt_us(x: Any) -> str:
    if not is_num(x):
        return "–"
    x = float(x)
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def fmt_ratio(x: Any) -> str:
    return f"{float(x):.3f}" if is_num(x) else "–"


def case_label(batch: int, n: int, cond: float, case_name: str) -> str:
    """The seed-free case name, as tracker.suites.Case.label spells it."""
    return f"{batch}x{n} c{cond:g} {case_name}"


def short(run_id: Any) -> str:
    return str(run_id)[:12] if is_num(run_id) else ""


# ------------------------------------------------------------------------------------------- experiments


def experiments_table(df: pd.DataFrame) -> pd.DataFrame:
    """The Experiments grid: one row per variant and context, with link columns to the runs."""
    out = pd.DataFrame(
        {
            "variant": df["variant"],
            "sha": df["variant_sha256"].str[:8],
            "family": df["family"],
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
            "note": [
                n if isinstance(n, str) else (r if isinstance(r, str) else None)
                for n, r in zip(df["note"], df["verdict_reason"], strict=True)
            ],
        }
    )
    return out.reset_index(drop=True)


def best_so_far(points: pd.DataFrame) -> pd.DataFrame:
    """Running minimum of the geomean over time, per context (suite · GPU); one row per improvement."""
    if points.empty:
        return points.assign(context=[], best_us=[])
    df = points.assign(context=points["suite"] + " · " + points["gpu"].fillna("?"))
    df = df.sort_values("started_at", kind="stable")
    df["best_us"] = df.groupby("context")["geomean_us"].cummin()
    # keep the points where the best changes, plus the last one so the step reaches the present
    changed = df.groupby("context")["best_us"].transform(lambda s: s.ne(s.shift()))
    last = ~df.duplicated("context", keep="last")
    return df[changed | last]


def progress_figure(points: pd.DataFrame) -> go.Figure:
    """Every run a point coloured by family; the best-so-far geomean per context as a step line; log y."""
    fig = go.Figure()
    for i, (family, grp) in enumerate(points.groupby("family", sort=True)):
        fig.add_trace(
            go.Scattergl(
                x=grp["started_at"],
                y=grp["geomean_us"],
                mode="markers",
                name=str(family),
                legendgroup="family",
                legendgrouptitle_text="family",
                marker={"size": 6, "opacity": 0.65, "color": COLOURS[i % len(COLOURS)]},
                customdata=grp[["run_id", "variant"]].to_numpy(),
                hovertemplate="%{customdata[1]}<br>run %{customdata[0]}<br>%{y:.1f} µs<br>%{x}<extra></extra>",
            )
        )
    best = best_so_far(points)
    dashes = ["solid", "dash", "dot", "dashdot"]
    for k, (context, grp) in enumerate(best.groupby("context", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=grp["started_at"],
                y=grp["best_us"],
                mode="lines",
                line={"shape": "hv", "width": 2, "color": "#222", "dash": dashes[k % len(dashes)]},
                name=f"best so far ({context})",
                legendgroup="best",
                legendgrouptitle_text="best so far",
                customdata=grp[["run_id", "variant"]].to_numpy(),
                hovertemplate="best %{y:.1f} µs<br>%{customdata[1]}<extra></extra>",
            )
        )
    fig.update_layout(
        title="Geomean per run and best so far",
        yaxis=TIME_AXIS | {"title": {"text": "geomean (µs, log)"}},
        xaxis_title="started",
        height=420,
        margin={"t": 50, "b": 40},
        legend={"groupclick": "toggleitem"},
    )
    return fig


# ---------------------------------------------------------------------------------------------------- run


def run_case_table(cases: pd.DataFrame) -> pd.DataFrame:
    """The Run page's per-case table: mean ± err, best, worst, GFLOP/s, pass/fail, scaled residuals."""
    rows = []
    for c in cases.to_dict("records"):
        mean, err = c.get("mean_us"), c.get("err_us")
        rows.append(
            {
                "#": c["case_idx"],
                "case": c["spec"],
                "ok": "pass" if c["passed"] else "FAIL",
                "mean ± err (µs)": f"{fmt_us(mean)} ± {fmt_us(err)}" if is_num(mean) else "–",
                "mean (µs)": mean if is_num(mean) else None,
                "best (µs)": c.get("best_us") if is_num(c.get("best_us")) else None,
                "worst (µs)": c.get("worst_us") if is_num(c.get("worst_us")) else None,
                "GFLOP/s": gflops(c.get("batch"), c.get("n"), mean),
                "runs": c.get("runs") if is_num(c.get("runs")) else None,
                "factor res": c.get("factor_res"),
                "tril res": c.get("tril_res"),
                "recon res": c.get("recon_res"),
                "orth res": c.get("orth_res"),
                "message": c.get("message") or "",
            }
        )
    return pd.DataFrame(rows)


def samples_by_case(cases: pd.DataFrame, samples: pd.DataFrame) -> dict[str, list[float]]:
    """Samples per case label, in case order."""
    groups = {k: g["time_us"].tolist() for k, g in samples.groupby("case_idx")} if not samples.empty else {}
    out: dict[str, list[float]] = {}
    for c in cases.to_dict("records"):
        label = c.get("label") or c["spec"]
        if label in out:  # two cases with one label (different seeds): keep both apart
            label = f"{label} #{c['case_idx']}"
        out[label] = groups.get(c["case_idx"], [])
    return out


def box_figure(per_case: Mapping[str, Sequence[float]], title: str = "Samples per case") -> go.Figure:
    fig = go.Figure()
    for label, values in per_case.items():
        if len(values):
            fig.add_trace(go.Box(y=list(values), name=label, boxpoints="suspectedoutliers", showlegend=False))
    fig.update_layout(title=title, yaxis=TIME_AXIS, height=420, margin={"t": 50, "b": 40})
    return fig


def profile_tables(profile_cases: pd.DataFrame, profile_kernels: pd.DataFrame, top: int = 15) -> dict[str, Any]:
    """Top kernels over all profiled cases, and launches / host time per case."""
    kernels = pd.DataFrame(columns=["kernel", "calls", "device (µs)", "self (µs)"])
    if not profile_kernels.empty:
        agg = profile_kernels.groupby("kernel", dropna=False).agg(
            calls=("calls", "sum"), device_us=("device_us", "sum"), self_us=("self_us", "sum")
        )
        key = "device_us" if agg["device_us"].fillna(0).gt(0).any() else "self_us"
        agg = agg.sort_values(key, ascending=False).head(top).reset_index()
        kernels = agg.rename(columns={"device_us": "device (µs)", "self_us": "self (µs)"})
    per_case = profile_cases.rename(
        columns={"case_idx": "#", "launches": "launches", "host_us": "host (µs)", "device_us": "device (µs)"}
    )
    return {"kernels": kernels, "cases": per_case}


def environment_rows(run: Mapping[str, Any]) -> pd.DataFrame:
    keys = ("host", "device", "gpu", "sm_count", "driver", "cuda", "torch", "triton", "python", "seed", "trigger",
            "pid", "started_at", "finished_at")  # fmt: skip
    return pd.DataFrame([{"field": k, "value": str(run.get(k)) if is_num(run.get(k)) else "–"} for k in keys])


# ------------------------------------------------------------------------------------------------ compare


def case_data(bundle: Mapping[str, Any]) -> dict[str, CaseData]:
    """A run's cases as tracker.stats input: samples and pass/fail per case label."""
    cases = bundle["cases"]
    per_case = samples_by_case(cases, bundle["samples"])
    passed = {}
    for c in cases.to_dict("records"):
        label = c.get("label") or c["spec"]
        passed[label if label not in passed else f"{label} #{c['case_idx']}"] = bool(c["passed"])
    return {label: CaseData(tuple(per_case[label]), passed[label]) for label in per_case}


def compare_bundles(a: Mapping[str, Any], b: Mapping[str, Any]) -> RunComparison:
    return compare_runs(case_data(a), case_data(b), gpu_a=a["run"].get("gpu"), gpu_b=b["run"].get("gpu"))


def _err_by_label(bundle: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for c in bundle["cases"].to_dict("records"):
        label = c.get("label") or c["spec"]
        out[label if label not in out else f"{label} #{c['case_idx']}"] = (
            c.get("err_us") if is_num(c.get("err_us")) else None
        )
    return out


def compare_table(cmp: RunComparison, a: Mapping[str, Any], b: Mapping[str, Any]) -> pd.DataFrame:
    """Per case, side by side: mean ± err of A and B, ratio B/A with its CI, p value, mark and verdict."""
    err_a, err_b = _err_by_label(a), _err_by_label(b)
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
    return pd.DataFrame(rows)


def grouped_bars_figure(cmp: RunComparison, a: Mapping[str, Any], b: Mapping[str, Any]) -> go.Figure:
    """Mean time per case of A and B as grouped bars with error bars, log axis."""
    err_a, err_b = _err_by_label(a), _err_by_label(b)
    labels = [c.case for c in cmp.cases]
    fig = go.Figure()
    for side, key, errs, colour in (("A", "mean_a", err_a, "#1f77b4"), ("B", "mean_b", err_b, "#ff7f0e")):
        run = a if side == "A" else b
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[getattr(c, key) for c in cmp.cases],
                error_y={"type": "data", "array": [errs.get(lbl) or 0 for lbl in labels]},
                name=f"{side}: {run['run'].get('variant')} ({short(run['run'].get('run_id'))})",
                marker_color=colour,
            )
        )
    fig.update_layout(
        barmode="group", title="Mean time per case (log axis, error bars: standard error)", yaxis=TIME_AXIS,
        height=440, margin={"t": 80, "b": 40}, legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
    )  # fmt: skip
    return fig


def speedup_figure(cmp: RunComparison) -> go.Figure:
    """Speedup of B over A per case (A/B), as bars starting at 1.0, coloured by the statistical verdict."""
    cases = [c for c in cmp.cases if c.ratio]
    speedups = [1.0 / c.ratio for c in cases]
    fig = go.Figure(
        go.Bar(
            x=[c.case for c in cases],
            y=[s - 1.0 for s in speedups],
            base=1.0,
            marker_color=[MARK_COLOURS.get(c.verdict, "#999") for c in cases],
            customdata=[[s, c.verdict, c.mark] for s, c in zip(speedups, cases, strict=True)],
            hovertemplate="%{x}<br>speedup %{customdata[0]:.3f}x (%{customdata[1]})<extra></extra>",
            text=[
                f"{s:.3f}×" if c.verdict in ("faster", "slower") else "" for s, c in zip(speedups, cases, strict=True)
            ],
            textposition="outside",
            name="speedup A/B",
        )
    )
    fig.add_hline(y=1.0, line={"color": "#444", "width": 1})
    lo = min(speedups + [1.0]) if speedups else 1.0
    hi = max(speedups + [1.0]) if speedups else 1.0
    pad = (math.log10(hi) - math.log10(lo)) * 0.15 + 0.02
    fig.update_layout(
        title="Speedup of B over A (A time / B time; > 1: B is faster)",
        yaxis={"type": "log", "title": {"text": "speedup (log)"},
               "range": [math.log10(lo) - pad, math.log10(hi) + pad]},
        height=400, margin={"t": 50, "b": 40}, showlegend=False,
    )  # fmt: skip
    return fig


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


# -------------------------------------------------------------------------------------------- regressions


def history_points(hist: Mapping[str, pd.DataFrame]) -> dict[str, list[HistoryPoint]]:
    """Per case label, one HistoryPoint per run of the history (oldest first); failed runs are kept as such."""
    runs, cases, samples = hist["runs"], hist["cases"], hist["samples"]
    sample_map = {(r, c): s for r, c, s in zip(samples["run_id"], samples["case_idx"], samples["samples"], strict=True)}
    rows: dict[tuple[str, str], tuple[int, bool, float | None]] = {}
    for run_id, label, idx, ok, mean in zip(
        cases["run_id"], cases["label"], cases["case_idx"], cases["passed"], cases["mean_us"], strict=True
    ):
        rows.setdefault((run_id, label), (idx, bool(ok), float(mean) if is_num(mean) else None))
    labels: list[str] = list(dict.fromkeys(cases["label"]))
    out: dict[str, list[HistoryPoint]] = {label: [] for label in labels}
    for run_id, status in zip(runs["run_id"], runs["status"], strict=True):
        not_passed = status if status != "passed" else "failed"
        for label in labels:
            row = rows.get((run_id, label))
            if row is None:
                out[label].append(HistoryPoint(run_id, None, (), not_passed))
                continue
            idx, ok, mean = row
            got = sample_map.get((run_id, idx))
            out[label].append(
                HistoryPoint(
                    run_id,
                    mean,
                    got if got is not None else (),
                    "passed" if ok and status == "passed" else not_passed,
                )
            )
    return out


def without_samples(points: Mapping[str, Sequence[HistoryPoint]]) -> dict[str, list[HistoryPoint]]:
    return {label: [HistoryPoint(p.run_id, p.mean, (), p.status) for p in pts] for label, pts in points.items()}


def detect_all(points: Mapping[str, Sequence[HistoryPoint]]) -> dict[str, list[ChangePoint]]:
    return {label: detect_changes(label, pts) for label, pts in points.items()}


def regression_table(
    changes: Mapping[str, Sequence[ChangePoint]],
    points: Mapping[str, Sequence[HistoryPoint]],
    runs: pd.DataFrame,
    *,
    kinds: Sequence[str] = ("regression",),
) -> pd.DataFrame:
    """Case, before, after, factor, the run that introduced it, and a compare link (last good run vs that run)."""
    info = runs.set_index("run_id")
    rows = []
    for label, cps in changes.items():
        pts = points[label]
        for cp in cps:
            if cp.kind not in kinds:
                continue
            before_run = next(
                (
                    p.run_id
                    for p in reversed(pts[: cp.index])
                    if p.status == "passed" and p.mean is not None and p.mean > 0
                ),
                None,
            )
            meta = info.loc[cp.run_id] if cp.run_id in info.index else None
            rows.append(
                {
                    "case": label,
                    "kind": cp.kind,
                    "before (µs)": cp.before,
                    "after (µs)": cp.after,
                    "factor": cp.factor,
                    "run": cp.run_id,
                    "variant": None if meta is None else meta["variant"],
                    "started": None if meta is None else meta["started_at"],
                    "run before": before_run,
                    "compare": f"compare?a={before_run}&b={cp.run_id}" if before_run else None,
                }
            )
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.sort_values("factor", ascending=False, key=lambda s: (s.map(math.log)).abs()).reset_index(drop=True)
    return df


def timeline_figure(
    points: Mapping[str, Sequence[HistoryPoint]],
    changes: Mapping[str, Sequence[ChangePoint]],
    runs: pd.DataFrame,
    errs: Mapping[tuple[str, str], float],
    *,
    cols: int = 3,
) -> go.Figure:
    """Per case, the mean of every passed run with its error bar (log y); change points as dashed lines with
    the segment levels before and after. Built as plain dicts in one go (Plotly's per-subplot helpers are slow)."""
    labels = list(points)
    rows = max(1, math.ceil(len(labels) / cols))
    fig = go.Figure(layout=_grid_layout(labels, rows, cols))
    variant = dict(zip(runs["run_id"], runs["variant"], strict=True))
    traces: list[dict[str, Any]] = []
    shapes: list[dict[str, Any]] = []
    axes: dict[str, Any] = {}
    for k, label in enumerate(labels):
        ax = "" if k == 0 else str(k + 1)
        xref, yref = f"x{ax}", f"y{ax}"
        axes[f"yaxis{ax}"] = {"type": "log"}
        pts = points[label]
        xs, ys, es, text, fx, ftext = [], [], [], [], [], []
        for i, p in enumerate(pts):
            name = variant.get(p.run_id, "")
            if p.status == "passed" and p.mean is not None:
                xs.append(i)
                ys.append(p.mean)
                es.append(errs.get((p.run_id, label)) or 0.0)
                text.append(f"{name} · {p.run_id}")
            else:
                fx.append(i)
                ftext.append(f"{name} · {p.run_id} · {p.status}")
        traces.append({
            "type": "scatter", "x": xs, "y": ys, "xaxis": xref, "yaxis": yref, "mode": "lines+markers",
            "name": label, "showlegend": False, "text": text,
            "error_y": {"type": "data", "array": es, "thickness": 1, "width": 2},
            "marker": {"size": 5, "color": "#1f77b4"}, "line": {"width": 1, "color": "#9ecae1"},
            "hovertemplate": "%{text}<br>%{y:.2f} µs<extra></extra>",
        })  # fmt: skip
        if fx:
            traces.append({
                "type": "scatter", "x": fx, "y": [min(ys) if ys else 1.0] * len(fx), "xaxis": xref, "yaxis": yref,
                "mode": "markers", "name": "not passed", "showlegend": False, "text": ftext,
                "marker": {"symbol": "x", "size": 7, "color": "#999"}, "hovertemplate": "%{text}<extra></extra>",
            })  # fmt: skip
        cps = list(changes.get(label, ()))
        for kind, colour in (("regression", "#d62728"), ("improvement", "#2ca02c")):
            sx: list[float | None] = []
            sy: list[float | None] = []
            hover: list[str | None] = []
            for j, cp in enumerate(cps):
                if cp.kind != kind:
                    continue
                start = cps[j - 1].index if j else 0
                end = cps[j + 1].index if j + 1 < len(cps) else len(pts)
                x = cp.index - 0.5
                sx += [start, x, x, end - 1, None]
                sy += [cp.before, cp.before, cp.after, cp.after, None]
                tip = f"{kind}: {cp.before:.2f} → {cp.after:.2f} µs (×{cp.factor:.3f}), run {cp.run_id}"
                hover += [tip] * 4 + [None]
                shapes.append({
                    "type": "line", "xref": xref, "yref": f"{yref} domain", "x0": x, "x1": x, "y0": 0, "y1": 1,
                    "line": {"dash": "dash", "color": colour, "width": 1.5},
                })  # fmt: skip
            if sx:
                traces.append({
                    "type": "scatter", "x": sx, "y": sy, "xaxis": xref, "yaxis": yref, "mode": "lines",
                    "line": {"color": colour, "width": 2}, "showlegend": False, "name": kind, "text": hover,
                    "hovertemplate": "%{text}<extra></extra>",
                })  # fmt: skip
    fig.add_traces(traces)
    fig.update_layout(
        axes, shapes=shapes, height=260 * rows + 60, margin={"t": 60, "b": 30},
        title="Mean per run (µs, log) along the history; dashed: change points",
    )  # fmt: skip
    return fig


def _unit(x: float) -> float:
    return min(1.0, max(0.0, round(x, 6)))


def _grid_layout(labels: Sequence[str], rows: int, cols: int) -> dict[str, Any]:
    """Axes and titles of a rows x cols grid of subplots, as make_subplots lays them out (without its cost)."""
    hgap, vgap = 0.2 / cols, 0.32 / rows
    width, height = (1 - hgap * (cols - 1)) / cols, (1 - vgap * (rows - 1)) / rows
    layout: dict[str, Any] = {"annotations": []}
    for k, label in enumerate(labels or ["no cases"]):
        r, c = divmod(k, cols)
        ax = "" if k == 0 else str(k + 1)
        x0 = c * (width + hgap)
        y1 = 1 - r * (height + vgap)
        layout[f"xaxis{ax}"] = {"domain": [_unit(x0), _unit(x0 + width)], "anchor": f"y{ax}"}
        layout[f"yaxis{ax}"] = {"domain": [_unit(y1 - height), _unit(y1)], "anchor": f"x{ax}"}
        layout["annotations"].append({
            "text": label, "x": x0 + width / 2, "y": y1, "xref": "paper", "yref": "paper", "xanchor": "center",
            "yanchor": "bottom", "showarrow": False, "font": {"size": 12},
        })  # fmt: skip
    return layout
