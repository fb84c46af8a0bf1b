"""Leaderboard: one row per variant, one column per case; each cell the best passed mean, coloured by its ratio to
the best variant in that column. Which variant is best on which shape, at a glance, for hundreds of variants."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import _common as common
from pages._derived import cached
from pages.ui import heatmap, paging, urlstate
from tracker.analysis import context, gaps, margins, summaries
from tracker.common.text import counted
from tracker.store import Store

common.page_setup()
st.title("Leaderboard")
common.require_runs()
contexts = common.read(Store.run_contexts)
timed = context.TIMED_MODES
# Each choice offers only what has timed runs under the choices before it, most recently passed first.
# One problem a board (another problem's cases are not the same cases): a Problem choice where the store has several.
many = contexts.loc[contexts["mode"].isin(timed), "problem"].nunique() > 1
row = common.filter_row()
gpus = context.choices(contexts, "gpu", modes=timed, prefer=common.gpu_filter())
if not gpus:
    st.info("No benchmark or leaderboard runs yet: the leaderboard ranks timed runs (`--mode test` runs are untimed).")
    st.stop()
gpu = urlstate.selectbox(row, "GPU", gpus, key="gpu",
                         help="One GPU model at a time: timings of different GPUs are never ranked")  # fmt: skip
suite = urlstate.selectbox(row, "Suite", context.choices(contexts, "suite", modes=timed, gpu=gpu), key="suite")
problems = context.choices(contexts, "problem", modes=timed, gpu=gpu, suite=suite)
problem = urlstate.selectbox(row, "Problem", problems, key="problem") if many else next(iter(problems), None)
mode = urlstate.selectbox(row, "Mode", context.choices(contexts, "mode", modes=timed, gpu=gpu, suite=suite,
                                                          problem=problem), key="mode")  # fmt: skip
families = context.choices(contexts, "family", modes=(mode,), gpu=gpu, suite=suite, problem=problem)
family = urlstate.selectbox(row, "Family", [common.ANY, *families], key="family")
chosen_family = None if family == common.ANY else family
data = common.read(Store.leaderboard_cells, suite=suite, mode=mode, gpu=gpu, family=chosen_family, problem=problem)
ctx_key = (suite, mode, gpu, family, problem)
board = cached(summaries.leaderboard, ctx_key, data)
if board["table"].empty:
    md = common.md
    st.info(
        f"No {md(mode)} runs of suite {md(suite)} on {md(gpu)}"
        + (f" in family {md(family)}." if family != common.ANY else ".")
    )
    st.stop()
sort = urlstate.selectbox(row, "Sort by", ["geomean", *board["cases"]], key="sort")
if sort != "geomean":
    board = cached(summaries.leaderboard, (*ctx_key, sort), data, sort=sort)

# The heatmap's styling costs per cell, and every row shown goes to the browser: a page of rows at a time.
ROWS = 100
table, rows_shown = paging.page_of(board["table"], per_page=ROWS, key="lb_page")
ratio = board["ratio"].loc[table.index]
st.caption(
    f"{counted(len(board['table']), 'variant')} · {counted(len(board['cases']), 'case')} · "
    f"{f'{problem} · ' if many and problem != suite else ''}{suite} · {mode} · {gpu}. "  # qr_v2's suite names it
    "A cell is the best mean (µs) on that case of the variant's passed runs (blank: none passed); green is the best "
    "in its column, red 2x or more slower. A column is named by its case's shape (batch×n); hover a header for the "
    "whole case. Select a cell to open its run. " + rows_shown
)
# A new CPU run moves the default board to CPU: the others stay one click away, each on its most recent suite
others = [(g, next(iter(context.choices(contexts, "suite", modes=timed, gpu=g)), None)) for g in gpus if g != gpu]
if others:
    with st.container(horizontal=True):
        st.caption("Other boards of this store:")
        for other_gpu, other_suite in others:
            st.page_link("pages/leaderboard.py", label=f"{other_gpu} · {other_suite}", icon=":material/leaderboard:",
                         query_params={"gpu": other_gpu, "suite": other_suite})  # fmt: skip
shown = heatmap.leaderboard_frame(table, board["cases"])
# Short headers, the unit in the caption and in each help: the twelve case columns come first and fit the window.
headers = heatmap.case_headers(board["cases"])
event = common.table(
    heatmap.style(shown, ratio, board["cases"]),
    column_config={
        "variant": st.column_config.TextColumn("variant", pinned=True),
        "geomean (µs)": st.column_config.NumberColumn(
            "geomean", pinned=True, help="Geomean (µs) of the variant's best passed run"
        ),
        "run": st.column_config.LinkColumn("best run", display_text=r"run\?id=(.*)"),
        **{c: st.column_config.NumberColumn(headers[c], help=f"{c}: best mean (µs)") for c in board["cases"]},
    },
    on_select="rerun",
    selection_mode="single-cell",
    key="lb_table",
    height=common.rows_height(len(shown), max_rows=25),
)
cells = getattr(getattr(event, "selection", None), "cells", None) or []
if cells:
    row, column = cells[0]
    sha = table.index[row]
    run_id = board["runs"].loc[sha, column] if column in board["cases"] else table.loc[sha, "best_run"]
    if isinstance(run_id, str):
        common.run_link(run_id, f"{table.loc[sha, 'variant']} · {column}: run {run_id}")
    else:
        st.caption(f"{common.md(table.loc[sha, 'variant'])} has no passed result on {common.md(column)}.")

# Gate margins over every run and seed of each variant: the ones that pass close to a tolerance.
_margins = common.gate_margins(list(board["table"].index))
_near = [(sha, m["closest"]) for sha, m in _margins.items() if m["near"] and sha in board["table"].index]
if _near:
    st.warning(f"{len(_near)} variant(s) run within {margins.NEAR:g}x of a correctness gate (worst over every run and "
               "seed): they pass here and may fail on a hidden seed.", icon=":material/speed:")  # fmt: skip
    common.table(
        pd.DataFrame(
            {
                "variant": [board["table"].loc[sha, "variant"] for sha, _ in _near],
                "gate": [c["gate"].removesuffix("_res") for _, c in _near],
                "case": [c["case"] for _, c in _near],
                "worst / tolerance": [c["ratio"] for _, c in _near],
                "runs": [c["runs"] for _, c in _near],
            }
        ),
        column_config={"worst / tolerance": st.column_config.NumberColumn(format="%.2f")},
        key="lb_near_gate",
    )

# Where the time goes (also `leaderboard --gaps` and the MCP tool leaderboard_gaps): one variant against the best
# any variant reached on each case.
st.subheader("Where the time goes")
ranked = list(dict.fromkeys(str(v) for v in board["table"]["variant"].dropna()))
pick = urlstate.selectbox(st, "Variant", ranked, key="variant")
try:
    g = cached(gaps.case_gaps, (*ctx_key, pick), data, pick)
except ValueError as exc:
    st.info(str(exc))
    st.stop()
st.caption(
    f"{common.md(g['variant'])}: geomean of its best case means {g['cells_geomean_us'] or float('nan'):,.1f} µs; "
    f"the best mean of each case, whichever variant reached it, would give {g['best_per_case_geomean_us']:,.1f} µs"
    + (f" ({g['ratio_to_best_per_case']:.3f}x)." if g["ratio_to_best_per_case"] else ".")
    + " Log share: the case's part of the log-geomean; gap share: its part of the way to the best-per-case geomean."
    + (f" No passed result on {common.md(', '.join(g['missing_cases']))}." if g["missing_cases"] else "")
)
common.table(
    pd.DataFrame(
        {
            "case": [c["case"] for c in g["cases"]],
            "mean (µs)": [c["mean_us"] for c in g["cases"]],
            "log share": [c["log_share"] for c in g["cases"]],
            "best (µs)": [c["best_us"] for c in g["cases"]],
            "best variant": [c["best_variant"] for c in g["cases"]],
            "x best": [c["ratio_to_best"] for c in g["cases"]],
            "gap share": [c["gap_share"] for c in g["cases"]],
            "best run": [f"run?id={c['best_run']}" for c in g["cases"]],
        }
    ),
    column_config={
        "log share": st.column_config.NumberColumn(format="percent"),
        "gap share": st.column_config.ProgressColumn(format="percent", min_value=0.0, max_value=1.0),
        "x best": st.column_config.NumberColumn(format="%.3f"),
        "best run": st.column_config.LinkColumn("best run", display_text=r"run\?id=(.*)"),
    },
    key="lb_gaps",
)
