"""Lineage: the parent -> child tree of a family (or of every variant), each node with its best geomean, latest
verdict and a link to compare it with its parent."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages import _common as common
from pages._derived import cached
from pages.ui import paging, urlstate
from pages.ui import tables as views
from tracker.analysis import context, summaries
from tracker.common.text import context_name, counted
from tracker.store import Store

ALL = "all variants"

common.page_setup()
st.title("Lineage")
common.require_runs()
contexts = common.read(Store.run_contexts)
families = common.read(Store.variant_families)
# One problem a tree (another problem's variants are not this one's): a Problem choice where the store has several.
many = contexts["problem"].nunique() > 1
row = common.filter_row()
family = urlstate.selectbox(row, "Family", [ALL, *families], key="family")
# GPU, suite and problem follow the runs (of the family, when one is chosen), most recently passed first.
fam = None if family == ALL else family
gpus = cached(context.choices, ("gpu", common.gpu_filter(), fam), contexts, "gpu", prefer=common.gpu_filter(),
              family=fam, loose=("family",))  # fmt: skip
gpu = urlstate.selectbox(row, "GPU", gpus or ["CPU"], key="gpu",
                         help="Geomeans and runs are taken in this suite and GPU")  # fmt: skip
suites = cached(context.choices, ("suite", gpu, fam), contexts, "suite", gpu=gpu, family=fam, loose=("family",))
suite = urlstate.selectbox(row, "Suite", suites or ["smoke"], key="suite")
problems = cached(context.choices, ("problem", gpu, suite, fam), contexts, "problem", gpu=gpu, suite=suite,
                  family=fam, loose=("family",))  # fmt: skip
problem = urlstate.selectbox(row, "Problem", problems, key="problem") if many else next(iter(problems), None)
nodes = common.read(Store.lineage_nodes, family=fam, suite=suite, gpu=gpu, problem=problem)
tree = cached(summaries.lineage_tree, (family, suite, gpu, problem), nodes)
names = cached(common.variant_labels, (family, suite, gpu, problem), nodes)  # sources named alike: name@sha8
if tree.empty:
    st.info("No variants" + (f" in family {common.md(family)}." if family != ALL else "."))
    st.stop()
roots = int((tree["depth"] == 0).sum())
n_variants = len(tree)
# Every row shown goes to the browser (2,000 variants were 2 MB): a page of the tree at a time, in tree order.
tree, rows_shown = paging.page_of(tree, per_page=250, key="lineage_page")


def _label(row) -> str:
    return ("    " * int(row["depth"]) + ("└─ " if row["depth"] else "")) + names[row["sha256"]]


def _compare(row) -> str | None:
    own = row["best_run"] if isinstance(row["best_run"], str) else row["latest_run"]
    if isinstance(row["parent_run"], str) and isinstance(own, str):
        return f"compare?a={row['parent_run']}&b={own}"
    return None


shown = pd.DataFrame(
    {
        "variant": [_label(r) for r in tree.to_dict("records")],
        "geomean (µs)": tree["best_geomean_us"],
        "verdict": tree["verdict"].fillna(""),
        "latest status": tree["latest_status"].fillna("not run"),
        "runs": tree["runs"],
        "parent": tree["parent"].map(names).where(tree["parent_variant"].notna(), ""),
        "vs parent": [_compare(r) for r in tree.to_dict("records")],
        "run": [f"run?id={r}" if isinstance(r, str) else None for r in tree["best_run"].fillna(tree["latest_run"])],
        "path": tree["path"],
        "commit": [views.short_commit(c) if isinstance(c, str) else "" for c in tree["commit"]],
        "message": tree["message"].fillna("").str.split("\n").str[0],
    }
)
st.caption(
    f"{counted(n_variants, 'variant')}, {counted(roots, 'root')} · geomeans on "
    f"{common.md(context_name(suite, gpu, problem if many else None))}. "
    "Indentation shows parent → child. " + rows_shown
)
common.table(
    shown,
    column_config={
        "variant": st.column_config.TextColumn(width="large"),
        "verdict": st.column_config.TextColumn(width=100),  # "inconclusive" whole
        "vs parent": st.column_config.LinkColumn("vs parent", display_text="compare"),
        "run": st.column_config.LinkColumn("run", display_text=r"run\?id=(.*)"),
    },
    key="lineage",
    height=common.rows_height(len(shown), max_rows=40),
)

# Dead ends: what was tried and rejected, so that it is not tried again unchanged (`run` and `add` warn).
dead = common.read(Store.dead_ends, families=None if family == ALL else [family], problem=problem)
st.subheader("Dead ends")
if not dead:
    st.caption("No rejected variants" + (f" in family {family}." if family != ALL else "."))
else:
    common.table(
        pd.DataFrame(
            {
                "variant": [d["variant"] for d in dead],
                "reason": [d["reason"] for d in dead],
                "assumption": [d["assumption"] for d in dead],
                "run": [f"run?id={d['run_id']}" for d in dead],
                "family": [d["family"] for d in dead],
                "when": pd.to_datetime([d["created_at"] for d in dead], utc=True, format="ISO8601"),  # to the second
            }
        ),
        column_config={"run": st.column_config.LinkColumn("run", display_text=r"run\?id=(.*)")},
        key="dead_ends",
    )
