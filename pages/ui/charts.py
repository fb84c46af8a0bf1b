"""Plotly figures for the dashboard pages: progress, samples per case, compare bars and speedups, history timelines."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from pages.ui.tables import err_by_label, short
from pages.ui.text import plain
from tracker.analysis.stats import ChangePoint, HistoryPoint, RunComparison

MARK_COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#9e9e9e", "n/a": "#c7c7c7"}
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]
TIME_AXIS = {"type": "log", "title": {"text": "time (µs, log)"}}


# -------------------------------------------------------------------------------------------- experiments


def best_so_far(points: pd.DataFrame) -> pd.DataFrame:
    """Running minimum of the geomean in run order, per context (suite · GPU); one row per improvement."""
    if points.empty:
        return points.assign(context=[], best_us=[])
    df = points.assign(context=points["suite"] + " · " + points["gpu"].fillna("?"))
    df = df.sort_values(["started_at", "run_id"], kind="stable")
    df["best_us"] = df.groupby("context")["geomean_us"].cummin()
    # keep the points where the best changes, plus the last one so the step reaches the present
    changed = df.groupby("context")["best_us"].transform(lambda s: s.ne(s.shift()))
    last = ~df.duplicated("context", keep="last")
    return df[changed | last]


def log_ticks(lo: float, hi: float, *, most: int = 8, widen: bool = False) -> dict[str, Any]:
    """Tick values and labels for a log axis over [lo, hi] that read as plain numbers: 1-2-5 steps over a wide
    range, evenly spaced round values over a narrow one (Plotly's own ticks there read 3822.43, 3822.44). With
    `widen`, values within 2% of each other get a ±1% axis range (where small steps are not the point)."""
    if not (lo > 0 and hi > 0):
        return {}
    lo, hi = min(lo, hi), max(lo, hi)
    extra: dict[str, Any] = {}
    if hi / lo >= 3:
        for mantissas in ((1, 2, 5), (1, 3), (1,)):
            vals = [m * 10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
                    for m in mantissas]  # fmt: skip
            inside = [v for v in vals if lo / 1.05 <= v <= hi * 1.05]
            if len(inside) <= most:
                break
        # one step beyond each end too: the axis reaches past the data, and Plotly leaves out ticks off it
        vals = [v for v in vals if lo / 4 <= v <= hi * 4]
        step = min(inside) if inside else 1.0
    else:
        if widen and hi - lo < 0.02 * hi:  # nearly equal values: a ±1% window, so the ticks are round numbers
            lo, hi = min(lo, hi / 1.02) * 0.99, hi * 1.01
            extra = {"range": [math.log10(lo), math.log10(hi)]}
        raw = (hi - lo) / 4 or hi / 100
        base = 10.0 ** math.floor(math.log10(raw))
        step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
        vals = [k * step for k in range(math.floor(lo / step), math.ceil(hi / step) + 1)]
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    ticks = {"tickmode": "array", "tickvals": vals, "ticktext": [f"{v:,.{digits}f}" for v in vals]}
    return ticks | extra


PROGRESS_X = ("run order", "time")  # the x axes of the progress chart, as the page offers and the URL names them


def progress_spec(points: pd.DataFrame, x: str = "run order") -> dict:
    """progress_figure as a plain dict: what a page caches (a Figure is rebuilt and validated when unpickled)."""
    return progress_figure(points, x=x).to_dict()


def progress_figure(points: pd.DataFrame, x: str = "run order") -> go.Figure:
    """Every passed run a point coloured by family, named on hover; the best-so-far geomean per context as a step
    line; log y with readable ticks. x: "run order" (the n-th passed run of its context) or "time" (started)."""
    col = "started_at" if x == "time" else "run_order"
    fig = go.Figure()
    for i, (family, grp) in enumerate(points.groupby("family", sort=True)):
        fig.add_trace(
            go.Scattergl(
                x=grp[col],
                y=grp["geomean_us"],
                mode="markers",
                name=plain(family),
                legendgroup="family",
                legendgrouptitle_text="family",
                marker={"size": 7, "opacity": 0.7, "color": COLOURS[i % len(COLOURS)]},
                # Built per column, not per point: thousands of points per family.
                customdata=np.column_stack(
                    [
                        grp["run_id"].to_numpy(dtype=object),
                        grp["variant"].map(plain).to_numpy(dtype=object),
                        np.full(len(grp), plain(family), dtype=object),
                        pd.to_datetime(grp["started_at"]).dt.strftime("%Y-%m-%d %H:%M").to_numpy(dtype=object),
                        grp["run_order"].to_numpy(dtype=object),
                    ]
                ),  # fmt: skip
                hovertemplate="<b>%{customdata[1]}</b> (%{customdata[2]})<br>%{y:,.1f} µs<br>run #%{customdata[4]}"
                " · %{customdata[3]}<br>%{customdata[0]}<extra></extra>",
            )
        )
    best = best_so_far(points)
    dashes = ["solid", "dash", "dot", "dashdot"]
    for k, (context, grp) in enumerate(best.groupby("context", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=grp[col],
                y=grp["best_us"],
                mode="lines",
                line={"shape": "hv", "width": 2, "color": "#222", "dash": dashes[k % len(dashes)]},
                name=f"best so far ({plain(context)})",
                legendgroup="best",
                legendgrouptitle_text="best so far",
                customdata=[[plain(v)] for v in grp["variant"]],
                hovertemplate="best so far %{y:,.1f} µs<br>%{customdata[0]}<extra></extra>",
            )
        )
    ys = points["geomean_us"] if not points.empty else pd.Series([1.0])
    xaxis = {"title": {"text": "started (UTC)" if x == "time" else "run order (passed runs of this suite and GPU)"}}
    if x != "time":
        last = int(points["run_order"].max()) if not points.empty else 1
        xaxis |= {"tickformat": "d", "tick0": 0, "dtick": max(1, math.ceil(last / 10))}  # whole runs only
    fig.update_layout(
        title="Geomean per passed run and best so far",
        yaxis=TIME_AXIS | {"title": {"text": "geomean (µs, log)"}} | log_ticks(ys.min(), ys.max(), widen=True),
        xaxis=xaxis,
        height=420,
        margin={"t": 50, "b": 40},
        legend={"groupclick": "toggleitem"},
    )
    return fig


# ---------------------------------------------------------------------------------------------------- run


def box_figure(per_case: Mapping[str, Sequence[float]], title: str = "Samples per case", *, cols: int = 6) -> go.Figure:
    """One box per case, each in a small chart of its own with its own linear µs axis: on one shared axis, cases
    a thousand times apart in time (or one noisy launch-bound case) would flatten every other box to a line."""
    labels = [label for label, values in per_case.items() if len(values)]
    rows = max(1, math.ceil(len(labels) / cols))
    layout = _grid_layout(labels, rows, cols)
    traces = []
    for k, label in enumerate(labels):
        ax = "" if k == 0 else str(k + 1)
        layout[f"xaxis{ax}"] |= {"showticklabels": False}
        layout[f"yaxis{ax}"] |= {"tickformat": ",~r", "nticks": 5}
        traces.append({
            "type": "box", "y": [float(v) for v in per_case[label]], "name": plain(label), "xaxis": f"x{ax}",
            "yaxis": f"y{ax}", "boxpoints": "suspectedoutliers", "showlegend": False,
            "marker": {"color": COLOURS[k % len(COLOURS)]},
        })  # fmt: skip
    fig = go.Figure(data=traces, layout=layout)
    fig.update_layout(title=f"{title} (µs; each case on its own axis)", height=200 * rows + 80,
                      margin={"t": 70, "b": 20})  # fmt: skip
    return fig


# ------------------------------------------------------------------------------------------------ compare


def grouped_bars_figure(cmp: RunComparison, a: Mapping[str, Any], b: Mapping[str, Any]) -> go.Figure:
    """Mean time per case of A and B as grouped bars with error bars, log axis."""
    err_a, err_b = err_by_label(a), err_by_label(b)
    labels = [c.case for c in cmp.cases]
    fig = go.Figure()
    for side, key, errs, colour in (("A", "mean_a", err_a, "#1f77b4"), ("B", "mean_b", err_b, "#ff7f0e")):
        run = a if side == "A" else b
        fig.add_trace(
            go.Bar(
                x=labels,
                y=[getattr(c, key) for c in cmp.cases],
                error_y={"type": "data", "array": [errs.get(lbl) or 0 for lbl in labels]},
                name=plain(f"{side}: {run['run'].get('variant')} ({short(run['run'].get('run_id'))})"),
                marker_color=colour,
            )
        )
    means = [m for c in cmp.cases for m in (c.mean_a, c.mean_b) if m]
    ticks = log_ticks(min(means), max(means)) if means else {}
    fig.update_layout(
        barmode="group", title="Mean time per case (log axis, error bars: standard error)", yaxis=TIME_AXIS | ticks,
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


# -------------------------------------------------------------------------------------------- regressions


NAMED_TICKS = 12  # up to this many runs, the timeline's x ticks are the runs' variant names


def timeline_spec(points, changes, runs, errs) -> dict:
    """timeline_figure as a plain dict: what a page caches (a Figure is rebuilt and validated when unpickled)."""
    return timeline_figure(points, changes, runs, errs).to_dict()


def timeline_figure(
    points: Mapping[str, Sequence[HistoryPoint]],
    changes: Mapping[str, Sequence[ChangePoint]],
    runs: pd.DataFrame,
    errs: Mapping[tuple[str, str], float],
    *,
    cols: int = 3,
) -> go.Figure:
    """Per case, the mean of every passed run (log y; its standard error on hover: error bars of a few hundred
    runs in twelve charts cost the browser a second to draw); change points as dashed lines with
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
        # Run order is an integer; a short history names its runs (variants) on the axis itself.
        names = [variant.get(p.run_id, "") for p in pts]
        axes[f"xaxis{ax}"] = (
            {"tickmode": "array", "tickvals": list(range(len(pts))), "ticktext": names, "tickangle": -45}
            if len(pts) <= NAMED_TICKS else {"tickformat": "d", "dtick": math.ceil(len(pts) / NAMED_TICKS)}
        )  # fmt: skip
        xs, ys, text, fx, ftext = [], [], [], [], []
        for i, p in enumerate(pts):
            name = variant.get(p.run_id, "")
            if p.status == "passed" and p.mean is not None:
                xs.append(i)
                ys.append(p.mean)
                err = errs.get((p.run_id, label))
                text.append(f"{name} · {p.run_id}" + (f"<br>± {err:,.2f} µs (standard error)" if err else ""))
            elif p.status != "absent":  # a case the run did not include is no failure: not drawn
                fx.append(i)
                ftext.append(f"{name} · {p.run_id} · {p.status}")
        if ys:  # round numbers on each small chart's log axis
            axes[f"yaxis{ax}"] |= log_ticks(min(ys), max(ys), most=5)
        traces.append({
            "type": "scatter", "x": xs, "y": ys, "xaxis": xref, "yaxis": yref, "mode": "lines+markers",
            "name": label, "showlegend": False, "text": text,
            "marker": {"size": 5, "color": "#1f77b4"}, "line": {"width": 1, "color": "#9ecae1"},
            "hovertemplate": "%{y:,.2f} µs · %{text}<extra></extra>",
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
