"""Charts for the dashboard pages, as Vega-Lite: each a (frame, spec) pair for st.vega_lite_chart(frame, spec), the
frame the data and the spec a plain dict (what a page caches). Vega-Lite, not Plotly: Plotly's fixed cost per chart
(per subplot) was most of a page switch's time in the browser, and its 4.7 MB script most of a fresh load's; Vega
draws from 0.8 MB."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from pages.ui.tables import err_by_label, short
from tracker.analysis.stats import ChangePoint, HistoryPoint, RunComparison

MARK_COLOURS = {"faster": "#2ca02c", "slower": "#d62728", "same": "#9e9e9e", "n/a": "#c7c7c7"}
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


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
    range, evenly spaced round values over a narrow one (Plotly's own ticks there read 3822.43, 3822.44), which also
    gets `range`: the axis from its first tick to its last (log10). With `widen`, values within 2% of each other
    get about ±1% around them (where small steps are not the point)."""
    if not (lo > 0 and hi > 0):
        return {}
    lo, hi = min(lo, hi), max(lo, hi)
    extra: dict[str, Any] = {}
    if hi / lo >= 3:
        for mantissas in ((1, 2, 3, 5), (1, 2, 5), (1, 3), (1,)):  # the finest that fits: a tick in every stretch
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
        raw = (hi - lo) / 4 or hi / 100
        base = 10.0 ** math.floor(math.log10(raw))
        step = next(m * base for m in (1, 2, 2.5, 5, 10) if m * base >= raw)
        vals = [k * step for k in range(math.floor(lo / step), math.ceil(hi / step) + 1)]
        # The axis spans the ticks: left to itself, a log axis rounds out to powers of ten (1,000 to 10,000), where
        # a narrow range is a flat line with its tick labels on top of each other.
        extra = {"range": [math.log10(vals[0]), math.log10(vals[-1])]}
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    ticks = {"tickmode": "array", "tickvals": vals, "ticktext": [f"{v:,.{digits}f}" for v in vals]}
    return ticks | extra


Chart = tuple[pd.DataFrame, dict]  # what st.vega_lite_chart takes: the data, the Vega-Lite spec
# Thousands of points draw faster on a canvas than as SVG elements; Streamlit picks canvas by itself only where it
# can count the points (no transform), which the layered charts have.
CANVAS = {"embedOptions": {"renderer": "canvas"}}
# Panels one under the other, as wide as the page: Vega-Lite sizes no facet to its container, so grids of fixed
# panels (the box plots, the timelines) ran past an 800 px window. Streamlit sets each panel's width to the page's when
# the chart is drawn with width="stretch"; autosize fit-x takes the axes and padding out of it.
FIT_WIDTH = {"type": "fit-x", "contains": "padding"}

PROGRESS_X = ("run order", "time")  # the x axes of the progress chart, as the page offers and the URL names them


def _log_span(values: Iterable[float], margin: float) -> list[float]:
    """An explicit log-scale domain around `values`, `margin` times beyond each end. Charts set their domains:
    Vega-Lite otherwise takes each layer's extent, and warns of an infinite one for a layer its filter left empty."""
    values = [float(v) for v in values]
    return [min(values) / margin, max(values) * margin]


def _vega_time(t: pd.Timestamp) -> dict[str, Any]:
    """A UTC time as a Vega-Lite DateTime (a scale domain of a temporal field)."""
    return {"utc": True, "year": t.year, "month": t.month, "date": t.day, "hours": t.hour, "minutes": t.minute,
            "seconds": t.second, "milliseconds": t.microsecond // 1000}  # fmt: skip


# A run this many times slower than the median run of the chart is off its scale: one run near 100,000 µs (the
# shipped trust-tf32) squeezed a search of 2,700-4,300 µs into the bottom fifth of the log axis.
OFF_SCALE = 10.0


def off_scale(points: pd.DataFrame) -> pd.Series:
    """Which of the progress chart's runs are off its scale (more than OFF_SCALE times the median geomean): drawn at
    the top edge, not on the axis."""
    ys = points["geomean_us"].astype(float)
    return ys > OFF_SCALE * ys.median() if not ys.empty else ys.astype(bool)


def progress_chart(points: pd.DataFrame, x: str = "run order") -> Chart:
    """The progress chart as Vega-Lite (st.vega_lite_chart(frame, spec)): every passed run a point coloured by
    family, named on hover (click a family in the legend to pick it out); the best-so-far geomean per context as a
    step line; log y with readable ticks over the search's range: a run off the scale (off_scale) is a triangle on
    the top edge, its value on hover, and the best-so-far line runs along that edge until it comes in. x: "run
    order" (the n-th passed run of its context) or "time" (started)."""
    col = "started_at" if x == "time" else "run_order"
    best = best_so_far(points)
    started = pd.to_datetime(points["started_at"])
    frame = pd.concat(
        [
            pd.DataFrame({
                "layer": "run", "x": points[col], "y": points["geomean_us"],
                "family": points["family"].fillna("(none)"), "variant": points["variant"],
                "run_id": points["run_id"], "run": points["run_order"],
                "started": started.dt.strftime("%Y-%m-%d %H:%M"), "context": None,
            }),
            pd.DataFrame({
                "layer": "best", "x": best[col], "y": best["best_us"], "family": None, "variant": best["variant"],
                "run_id": best["run_id"], "run": best["run_order"], "started": None, "context": best["context"],
            }),
        ],
        ignore_index=True,
    )  # fmt: skip
    off = off_scale(points)
    ys = points.loc[~off, "geomean_us"] if not points.empty else pd.Series([1.0])
    ticks = log_ticks(ys.min(), ys.max(), widen=True)
    y_scale: dict[str, Any] = {"type": "log", "domain": _log_span(ys, 1.05)}
    if "range" in ticks:
        y_scale |= {"domain": [10 ** ticks["range"][0], 10 ** ticks["range"][1]], "nice": False}
    if off.any():  # drawn on the domain's edge (clamped), not beyond the plot
        y_scale |= {"clamp": True}
    title = "geomean (µs, log" + ("; ▲ off the scale above)" if off.any() else ")")
    y = {"field": "y", "type": "quantitative", "scale": y_scale, "title": title,
         "axis": {"format": ",~r"} | ({"values": ticks["tickvals"]} if ticks else {})}  # fmt: skip
    top = float(y_scale["domain"][1])
    # pixels beside the first and the last run: a dot on the plot's edge was cut in half (two runs: both)
    pad = 12
    if x == "time":  # explicit x domains too (_log_span says why)
        times = pd.to_datetime(frame["x"].dropna(), utc=True)
        x_scale = {"padding": pad} | ({"domain": [_vega_time(times.min()), _vega_time(times.max())]}
                                      if not times.empty else {})  # fmt: skip
        # a fixed format: Vega's default multi-format labels ticks a minute apart ":30" or "09 PM"
        x_enc = {"field": "x", "type": "temporal", "title": "started (UTC)", "scale": x_scale,
                 "axis": {"format": "%b %d %H:%M", "labelOverlap": True, "tickCount": 6}}  # fmt: skip
    else:
        xs = frame["x"].dropna().astype(float)
        x_scale = {"padding": pad} | ({"domain": [xs.min(), xs.max()]} if not xs.empty else {"zero": False})
        x_enc = {"field": "x", "type": "quantitative", "title": "run order (passed runs of this suite and GPU)",
                 "axis": {"format": "d", "tickMinStep": 1}, "scale": x_scale}  # fmt: skip
    families = sorted(frame.loc[frame["layer"] == "run", "family"].unique())
    spec = {
        "title": "Geomean per passed run and best so far",
        "usermeta": CANVAS,
        "description": "Progress chart: geomean per passed run of the families " + ", ".join(families)
        + ", and the best so far",
        "height": 380,
        "layer": [
            {
                "transform": [{"filter": "datum.layer === 'run'"}],
                "params": [{"name": "picked", "select": {"type": "point", "fields": ["family"]}, "bind": "legend"}],
                "mark": {"type": "point", "filled": True, "size": 45},
                "encoding": {
                    "x": x_enc, "y": y,
                    "shape": {"condition": {"test": f"datum.y > {top!r}", "value": "triangle-up"}, "value": "circle"},
                    "size": {"condition": {"test": f"datum.y > {top!r}", "value": 130}, "value": 45},
                    "color": {"field": "family", "type": "nominal", "scale": {"domain": families, "range": COLOURS},
                              "legend": {"title": "family (click to pick)"}},
                    "opacity": {"condition": {"param": "picked", "value": 0.7}, "value": 0.06},
                    "tooltip": [
                        {"field": "variant"}, {"field": "family"},
                        {"field": "y", "title": "geomean (µs)", "format": ",.1f"},
                        {"field": "run", "title": "run #"}, {"field": "started", "title": "started (UTC)"},
                        {"field": "run_id", "title": "run"},
                    ],
                },
            },
            {
                "transform": [{"filter": "datum.layer === 'best'"}],
                "mark": {"type": "line", "interpolate": "step-after", "color": "#222", "strokeWidth": 2},
                "encoding": {
                    "x": x_enc, "y": y,
                    "strokeDash": {"field": "context", "type": "nominal", "legend": {"title": "best so far"}},
                    "tooltip": [{"field": "y", "title": "best so far (µs)", "format": ",.1f"}, {"field": "variant"}],
                },
            },
        ],
        "resolve": {"legend": {"color": "independent", "strokeDash": "independent"}},
    }  # fmt: skip
    return frame, spec


# ---------------------------------------------------------------------------------------------------- run


def box_chart(per_case: Mapping[str, Sequence[float]], title: str = "Samples per case") -> Chart:
    """One horizontal box per case, each in a row of its own with its own linear µs axis: on one shared axis, cases
    a thousand times apart in time (or one noisy launch-bound case) would flatten every other box to a line.
    Outliers (beyond 1.5 times the interquartile range) are drawn as points. Draw it with width="stretch"."""
    labels = [label for label, values in per_case.items() if len(values)]
    frame = pd.DataFrame(
        {"case": [label for label in labels for _ in per_case[label]],
         "us": [float(v) for label in labels for v in per_case[label]]}
    )  # fmt: skip

    def span(label: str) -> list[float]:
        # each row's own domain (as _log_span, on a linear axis): a box without outliers has an empty layer
        lo, hi = min(per_case[label]), max(per_case[label])
        pad = (hi - lo) * 0.05 or abs(hi) * 0.01 or 1.0
        return [float(lo - pad), float(hi + pad)]

    spec = {
        "title": f"{title} (µs; each case on its own axis)",
        "description": f"{title}: a box per case of " + ", ".join(labels),
        "autosize": FIT_WIDTH,
        "vconcat": [
            {"transform": [{"filter": {"field": "case", "equal": label}}], "height": 22,
             "mark": {"type": "boxplot", "extent": 1.5, "size": 16},
             "encoding": {
                 "x": {"field": "us", "type": "quantitative", "scale": {"zero": False, "domain": span(label)},
                       "axis": {"format": ",~r", "tickCount": 6, "title": None}},
                 # the case names the row; one width for every row's labels keeps the boxes aligned
                 "y": {"field": "case", "type": "nominal", "title": None,
                       "axis": {"minExtent": 130, "maxExtent": 130, "labelLimit": 125, "ticks": False,
                                "domain": False}},
                 "color": {"field": "case", "type": "nominal", "sort": labels, "legend": None,
                           "scale": {"range": COLOURS}},
             }}
            for label in labels
        ],
        "spacing": 14,
        "resolve": {"scale": {"x": "independent"}},
    }  # fmt: skip
    return frame, spec


# ------------------------------------------------------------------------------------------------ compare


def grouped_bars_chart(cmp: RunComparison, a: Mapping[str, Any], b: Mapping[str, Any]) -> Chart:
    """Mean time per case of A and B as grouped bars with error bars (standard error), log axis."""
    err_a, err_b = err_by_label(a), err_by_label(b)
    labels = [c.case for c in cmp.cases]
    rows = []
    for side, key, errs in (("A", "mean_a", err_a), ("B", "mean_b", err_b)):
        run = a if side == "A" else b
        name = f"{side}: {run['run'].get('variant')} ({short(run['run'].get('run_id'))})"
        for c in cmp.cases:
            mean, err = getattr(c, key), errs.get(c.case) or 0.0
            if mean:
                rows.append({"case": c.case, "side": name, "mean": mean, "err": err, "lo": max(mean - err, mean / 10),
                             "hi": mean + err})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["case", "side", "mean", "err", "lo", "hi"])
    means = frame["mean"].tolist()
    ticks = log_ticks(min(means), max(means)) if means else {}
    # A bar on a log axis needs a floor to stand on: from zero, Vega draws nothing (its y2 is NaN).
    floor = min(frame["lo"]) / 1.5 if means else 1.0
    scale = {"type": "log", "domain": [floor, max(frame["hi"]) * 1.5] if means else [1, 10]}
    x = {
        "field": "case",
        "type": "nominal",
        "sort": labels,
        "title": None,
        "axis": {"labelAngle": -30, "labelOverlap": False, "labelLimit": 160},
    }  # every case named
    y = {"field": "mean", "type": "quantitative", "scale": scale, "title": "time (µs, log)",
         "axis": {"format": ",~r"} | ({"values": ticks["tickvals"]} if ticks else {})}  # fmt: skip
    side = {"field": "side", "type": "nominal"}
    spec = {
        "title": "Mean time per case (log axis, error bars: standard error)",
        "description": "Mean time per case of A and B: " + ", ".join(labels),
        "height": 360,
        "encoding": {"x": x, "xOffset": side},
        "layer": [
            {"mark": {"type": "bar"},
             "encoding": {"y": y, "y2": {"datum": floor}, "color": side | {"scale": {"range": ["#1f77b4", "#ff7f0e"]},
                                                   # a run a row: side by side, they ran past an 800 px page
                                                   "legend": {"orient": "top", "title": None, "labelLimit": 500,
                                                              "columns": 1}},
                          "tooltip": [{"field": "case"}, {"field": "side", "title": "run"},
                                      {"field": "mean", "title": "mean (µs)", "format": ",.2f"},
                                      {"field": "err", "title": "± standard error (µs)", "format": ",.2f"}]}},
            {"mark": {"type": "rule", "color": "#333"},
             "encoding": {"y": {"field": "lo", "type": "quantitative", "scale": scale}, "y2": {"field": "hi"}}},
        ],
    }  # fmt: skip
    return frame, spec


SPEEDUP_SPAN = 1.1


def speedup_chart(cmp: RunComparison) -> Chart:
    """Speedup of B over A per case (A/B), as bars starting at 1.0, coloured by the statistical verdict; the
    factor written on the bars that are faster or slower."""
    cases = [c for c in cmp.cases if c.ratio]
    frame = pd.DataFrame(
        {"case": [c.case for c in cases], "speedup": [1.0 / c.ratio for c in cases],
         "verdict": [c.verdict for c in cases], "mark": [c.mark for c in cases]}
    )  # fmt: skip
    shown = frame["verdict"].isin(["faster", "slower"])
    frame["label"] = [f"{s:.3f}×" if on else "" for s, on in zip(frame["speedup"], shown, strict=True)]
    # Symmetric around 1 on the log scale, so faster and slower read alike, fitted to the largest factor with room
    # for its label; at least SPEEDUP_SPAN each way (a few percent still shows as a bar, and noise not as a step).
    reach = max([abs(math.log10(v)) for v in frame["speedup"] if v > 0], default=0.0) * 1.2
    top = 10 ** max(reach, math.log10(SPEEDUP_SPAN))
    ticks = [t for t in log_ticks(1 / top, top).get("tickvals", []) if 1 / top <= t <= top]
    x = {"field": "case", "type": "nominal", "sort": [c.case for c in cases], "title": None,
         "axis": {"labelAngle": -30, "labelOverlap": False, "labelLimit": 160}}  # fmt: skip
    y = {"field": "speedup", "type": "quantitative", "title": "speedup (log)",
         "scale": {"type": "log", "domain": [1 / top, top], "nice": False},
         "axis": {"values": ticks, "format": ".3~g"}}  # fmt: skip
    spec = {
        "title": "Speedup of B over A (A time / B time; > 1: B is faster)",
        "description": "Speedup of B over A per case: " + ", ".join(frame["case"]),
        "height": 340,
        "layer": [
            {"mark": {"type": "bar"},
             "encoding": {"x": x, "y": y, "y2": {"datum": 1.0},
                          "color": {"field": "verdict", "type": "nominal", "legend": None,
                                    "scale": {"domain": list(MARK_COLOURS), "range": list(MARK_COLOURS.values())}},
                          "tooltip": [{"field": "case"}, {"field": "speedup", "format": ".3f"},
                                      {"field": "verdict"}]}},
            {"mark": {"type": "text", "dy": {"expr": "datum.speedup >= 1 ? -8 : 8"}, "fontSize": 11},
             "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
            {"mark": {"type": "rule", "color": "#444"}, "encoding": {"y": {"datum": 1.0}}},
        ],
    }  # fmt: skip
    return frame, spec


# -------------------------------------------------------------------------------------------- regressions


NAMED_TICKS = 12  # up to this many runs, the timeline's x ticks are the runs' variant names
TIMELINE_PANEL_HEIGHT = 100


def timeline_chart(
    points: Mapping[str, Sequence[HistoryPoint]],
    changes: Mapping[str, Sequence[ChangePoint]],
    runs: pd.DataFrame,
    errs: Mapping[tuple[str, str], float],
) -> Chart:
    """Per case, the mean of every passed run (log y, each case its own axis; its standard error on hover);
    change points as dashed lines with the segment levels before and after; runs that did not pass as grey x.
    One chart on one canvas (twelve Plotly subplots cost the browser one to two seconds a page switch), a panel per
    case one under the other (FIT_WIDTH); draw it with width="stretch"."""
    labels = list(points)
    variant = dict(zip(runs["run_id"], runs["variant"], strict=True))
    rows: list[dict[str, Any]] = []
    n_runs = 0
    for label in labels:
        pts = points[label]
        n_runs = max(n_runs, len(pts))
        ys = [p.mean for p in pts if p.status == "passed" and p.mean is not None]
        for i, p in enumerate(pts):
            name = variant.get(p.run_id, "")
            if p.status == "passed" and p.mean is not None:
                rows.append({"case": label, "layer": "mean", "x": i, "y": p.mean, "run": f"{name} · {p.run_id}",
                             "err": errs.get((p.run_id, label))})  # fmt: skip
            elif p.status != "absent":  # a case the run did not include is no failure: not drawn
                rows.append({"case": label, "layer": "not passed", "x": i, "y": min(ys) if ys else 1.0,
                             "run": f"{name} · {p.run_id}", "status": p.status})  # fmt: skip
        cps = list(changes.get(label, ()))
        for j, cp in enumerate(cps):
            start = cps[j - 1].index if j else 0
            end = cps[j + 1].index if j + 1 < len(cps) else len(pts)
            x = cp.index - 0.5
            tip = f"{cp.before:.2f} → {cp.after:.2f} µs (×{cp.factor:.3f}), run {cp.run_id}"
            rows.append({"case": label, "layer": "change", "x": x, "kind": cp.kind, "change": tip})
            for x0, x1, y0, y1 in ((start, x, cp.before, cp.before), (x, x, cp.before, cp.after),
                                   (x, end - 1, cp.after, cp.after)):  # fmt: skip
                rows.append({"case": label, "layer": "level", "x": x0, "x2": x1, "y": y0, "y2": y1, "kind": cp.kind,
                             "change": tip})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["case", "layer", "x", "x2", "y", "y2", "run", "err", "status", "kind",
                                        "change"])  # fmt: skip
    x_axis: dict[str, Any] = {"format": "d", "tickMinStep": 1, "title": "run order along the history"}
    if n_runs <= NAMED_TICKS:  # a short history names its runs (variants) on the axis itself
        names = [variant.get(p.run_id, "") for p in points[labels[0]]] if labels else []
        x_axis |= {"values": list(range(len(names))), "labelAngle": -45, "title": None,
                   "labelExpr": "[" + ",".join(json.dumps(n) for n in names) + "][datum.value] || ''"}  # fmt: skip
    scale = {"zero": False, "nice": False, "domain": [-0.5, max(n_runs - 0.5, 0.5)]}
    x = {"field": "x", "type": "quantitative", "axis": x_axis, "scale": scale}
    # the panels share the x axis: it is drawn under the last one, the others keep its grid
    x_bare = {**x, "axis": {**x_axis, "labels": False, "ticks": False, "domain": False, "title": None}}
    y_log = {"field": "y", "type": "quantitative", "scale": {"type": "log"},
             "axis": {"format": ",~r", "tickCount": 4, "title": None}}  # fmt: skip
    kind = {"field": "kind", "type": "nominal", "legend": None,
            "scale": {"domain": ["regression", "improvement"], "range": ["#d62728", "#2ca02c"]}}  # fmt: skip

    def only(layer: str) -> list[dict[str, str]]:
        return [{"filter": f"datum.layer === '{layer}'"}]

    def layers(x: dict[str, Any], label: str) -> list[dict[str, Any]]:
        # the panel's own y domain (_log_span): layers with no run that failed or no change point are empty
        values = frame.loc[frame["case"] == label, ["y", "y2"]].stack()
        y = dict(y_log)
        if not values.empty:
            y["scale"] = {**y_log["scale"], "domain": _log_span(values, 1.02)}
        return [
            {"transform": only("mean"), "mark": {"type": "line", "color": "#9ecae1", "strokeWidth": 1},
             "encoding": {"x": x, "y": y}},
            {"transform": only("mean"), "mark": {"type": "circle", "size": 22, "color": "#1f77b4", "opacity": 1},
             "encoding": {"x": x, "y": y, "tooltip": [
                 {"field": "y", "title": "mean (µs)", "format": ",.2f"}, {"field": "run"},
                 {"field": "err", "title": "± standard error (µs)", "format": ",.2f"}]}},
            {"transform": only("not passed"), "mark": {"type": "point", "shape": "cross", "color": "#999", "size": 50},
             "encoding": {"x": x, "y": y, "tooltip": [{"field": "run"}, {"field": "status"}]}},
            {"transform": only("change"), "mark": {"type": "rule", "strokeDash": [5, 3], "strokeWidth": 1.5},
             "encoding": {"x": x, "color": kind, "tooltip": [{"field": "kind"}, {"field": "change"}]}},
            {"transform": only("level"), "mark": {"type": "rule", "strokeWidth": 2},
             "encoding": {"x": x, "x2": {"field": "x2"}, "y": y, "y2": {"field": "y2"}, "color": kind,
                          "tooltip": [{"field": "kind"}, {"field": "change"}]}},
        ]  # fmt: skip

    spec = {
        "title": "Mean per run (µs, log); dashed: change points",
        "usermeta": CANVAS,
        "description": "Mean per run along the history of the cases " + ", ".join(labels),
        "autosize": FIT_WIDTH,
        "vconcat": [
            {"title": {"text": label, "fontSize": 12, "fontWeight": "normal"}, "height": TIMELINE_PANEL_HEIGHT,
             "transform": [{"filter": {"field": "case", "equal": label}}],
             "layer": layers(x if k == len(labels) - 1 else x_bare, label)}
            for k, label in enumerate(labels)
        ],
        "spacing": 16,
        "resolve": {"scale": {"y": "independent"}},
    }  # fmt: skip
    return frame, spec
