"""Experiments: one row per variant with its best and latest run, filters, search, and the progress chart."""

from __future__ import annotations

import datetime as dt

import streamlit as st

from pages import _common as common
from pages._derived import cached
from pages.ui import charts, paging, urlstate
from pages.ui import tables as views
from tracker.analysis import context
from tracker.common.text import counted
from tracker.common.vocabulary import DEFAULT_WORKLOAD
from tracker.store import Store
from tracker.store.reads.variants import VARIANT_SORTS

MAX_POINTS = 5000

common.page_setup()
st.title("Experiments")
common.require_runs()
facets = common.read(Store.facets)
gpu = common.gpu_filter()

top = common.filter_row()
search = urlstate.text_input(
    top, "Search", key="q", placeholder="variant, kernel path, family, note or hypothesis, verdict"
)
sort = urlstate.selectbox(top, "Sort by", list(VARIANT_SORTS), key="sort", width=200)
problem = common.ANY
if len(facets["problem"]) > 1:  # a choice only when the store holds runs of more than one problem
    problem = urlstate.selectbox(st, "Problem", [common.ANY, *facets["problem"]], key="problem")
row = common.filter_row()
suite = urlstate.selectbox(row, "Suite", [common.ANY, *facets["suite"]], key="suite")
mode = urlstate.selectbox(row, "Mode", [common.ANY, *facets["mode"]], key="mode")
status = urlstate.selectbox(row, "Status", [common.ANY, *facets["status"]], key="status")
family = urlstate.selectbox(row, "Family", [common.ANY, *facets["family"]], key="family")
first = facets["first"].date() if facets["first"] is not None else dt.date.today()
last = facets["last"].date() if facets["last"] is not None else dt.date.today()
dates = row.date_input(
    "Dates", value=[], min_value=first, max_value=max(last, dt.date.today()), key="dates",
    help="Empty: every date. Pick a first and a last day.", format="YYYY-MM-DD", width=250,  # a range's two dates
)  # fmt: skip
# An empty range is no filter, so runs that arrive later (another day) are never hidden by a stale default.
since = dates[0] if len(dates) >= 1 else None
until = dates[1] if len(dates) == 2 else None

filters = {
    "gpu": gpu,
    "suite": None if suite == common.ANY else suite,
    "mode": None if mode == common.ANY else mode,
    "family": None if family == common.ANY else family,
    "since": since,
    "until": until,
    "search": search or None,
    "problem": None if problem == common.ANY else problem,
}
filters_status = None if status == common.ANY else status
table = common.read(Store.variant_table, status=filters_status, sort=sort, **filters)
if table.empty:
    st.info("No runs match these filters" + (f" and the search “{common.md(search)}”." if search else "."))
    st.stop()

# Every filter of the table, status included, applies to the chart; a few thousand points draw the same chart as
# 100,000 (Store.progress_points keeps every new best and each family's extremes per time slice).
points = common.read(Store.progress_points, status=filters_status, max_points=MAX_POINTS, **filters)
# the contexts the progress chart can draw: those with a passed geomean (a lone cancelled run is none)
contexts = table.loc[table["best_geomean_us"].notna(), ["problem", "suite", "gpu"]].drop_duplicates()
m = common.metric_row()
m.metric("Variants", f"{table['variant_sha256'].nunique():,}", width="content")
m.metric("Runs", f"{int(table['runs'].sum()):,}", width="content")
m.metric("Passed", f"{int(table['passed'].sum()):,}", width="content")
if len(contexts) == 1:
    best = table.loc[table["best_geomean_us"].idxmin()]
    m.metric("Best geomean", f"{views.fmt_us(best['best_geomean_us'])} µs", help=f"{best['variant']}", width="content")
else:
    m.metric(
        "Timed contexts",
        len(contexts),
        help="Problem · suite · GPU: geomeans of different problems, suites or GPUs are not compared",
        width="content",
    )

if not points.empty:
    ctx = points["suite"] + " · " + points["gpu"].fillna("?")
    if points["problem"].nunique() > 1:  # name the problem only when the selection holds more than one
        problem = points["problem"].fillna(DEFAULT_WORKLOAD)
        ctx = ctx.where(problem == points["suite"], problem + " · " + ctx)  # once: "qr_v2 · qr_v2" read twice
    counts = points.assign(ctx=ctx).groupby("ctx", sort=False)["context_runs"].first()  # runs, not points drawn
    counts = counts.sort_values(ascending=False, kind="stable")
    # first: the context the other pages open on (that of the latest whole passed run), so a user's own new runs
    # are the first chart, not the context with the most runs; from its second run on: one run is one point, not
    # a search (a fresh clone's newest is a single H100 run beside the H200 search)
    opened = context.default_context(common.read(Store.run_contexts), gpu=gpu)
    first = ctx[(points["suite"] == opened["suite"]) & (points["gpu"].fillna("?") == (opened["gpu"] or "?"))
                & (points["problem"].fillna(DEFAULT_WORKLOAD) == opened["problem"])]  # fmt: skip
    if len(first) and counts[first.iloc[0]] >= 2:
        counts = counts[[first.iloc[0], *(c for c in counts.index if c != first.iloc[0])]]
    if len(counts) > 1:  # geomeans of different problems, suites or GPUs do not share an axis
        chosen = st.selectbox(
            "Progress chart of",
            list(counts.index),
            format_func=lambda c: f"{c} ({counted(counts[c], 'run')})",
            key="chart_ctx",
        )
        points = points[ctx == chosen]
    x = urlstate.radio(st, "Against", charts.PROGRESS_X, horizontal=True, key="x",
                       help="run order: the n-th passed run of this suite and GPU; time: when it started")  # fmt: skip
    chart_key = (tuple(sorted((k, str(v)) for k, v in filters.items())), filters_status, len(points), x,
                 str(points["suite"].iloc[0]), str(points["gpu"].iloc[0]), str(points["problem"].iloc[0]))  # fmt: skip
    frame, spec = cached(charts.progress_chart, chart_key, points, x=x)
    st.vega_lite_chart(frame, spec, key="progress")
    off = points[charts.off_scale(points)]
    if len(off):  # named here too: on the chart they are triangles on its top edge, named on hover
        named = [
            f"{common.md(v)} ({views.fmt_us(g)} µs)" for v, g in zip(off["variant"], off["geomean_us"], strict=True)
        ]
        more = f" and {len(named) - 5:,} more" if len(named) > 5 else ""
        st.caption(
            f"▲ on the top edge: {counted(len(off), 'run')} off the scale (over {charts.OFF_SCALE:g}x the median "
            f"geomean), so the search keeps the axis: {', '.join(named[:5])}{more}."
        )
    if len(points) < int(points["context_runs"].iloc[0]):
        st.caption(
            f"{int(points['context_runs'].iloc[0]):,} passed runs drawn as {len(points):,} points: every new best, "
            "and each family's fastest and slowest run in each of 300 slices of the run order."
        )
else:
    st.caption("No passed timed run in this selection, so no progress chart.")

# Every row shown goes to the browser: a page of variants at a time (the sort above orders all of them).
page, rows_shown = paging.page_of(table, per_page=200, key="variants_page")
common.table(
    views.experiments_table(page),
    column_config={
        "best run": st.column_config.LinkColumn("best run", display_text=r"run\?id=(.*)"),
        "latest run": st.column_config.LinkColumn("latest run", display_text=r"run\?id=(.*)"),
        "last run": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
    },
    key="variants",
    height=common.rows_height(len(page), max_rows=20),
)
st.caption(
    "One row per variant (source hash) and context (suite · GPU): its best passed run by geomean and its latest "
    "run. Click a column header to sort; links open the run. " + rows_shown
)
