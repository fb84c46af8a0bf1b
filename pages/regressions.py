"""Regressions: per case along a family or a kernel file, the timeline of means with change points, and the
runs that introduced regressions (each with a link to the compare view). URLs: regressions?family=.. or ?path=.."""

from __future__ import annotations

import streamlit as st

from pages import _common as common
from pages._derived import cached
from pages.ui import charts, urlstate
from pages.ui import tables as views
from tracker.analysis import context, gpustate, summaries
from tracker.analysis import series as analysis
from tracker.common.text import context_name, counted
from tracker.store import Store

# Change detection is quadratic in the number of runs: the default window keeps the page under a second.
SCOPED = ("family", "path", "suite", "problem", "variant")  # the URL's parameters that belong to one scope
WINDOWS = {"last 100 runs": 100, "last 200 runs": 200, "last 500 runs": 500, "last 1000 runs": 1000, "all runs": None}

common.page_setup()
st.title("Regressions")
common.require_runs()
scopes = common.read(Store.history_scopes)
families, paths = scopes["family"], scopes["path"]

qp_family, qp_path = st.query_params.get("family"), st.query_params.get("path")
# On every run, from the URL (Back and Forward set only the URL): a path alone means along a kernel file.
st.session_state["reg_kind"] = "Kernel file" if (qp_path and not qp_family) or families.empty else "Family"


def _set_scope() -> None:
    kind = st.session_state["reg_kind"]
    value = st.session_state.get("reg_family" if kind == "Family" else "reg_path")
    if kind == "Kernel file" and not paths.empty:  # the URL names the file even when it is the default one
        value = value if value in set(paths["path"]) else paths["path"].iloc[0]
    # another scope keeps none of this one's context or lineage path; in one call: one browser history entry
    keep = {k: v for k, v in st.query_params.to_dict().items() if k not in SCOPED}
    st.query_params.from_dict(keep | ({"family" if kind == "Family" else "path": value} if value else {}))


c_kind, c_value = st.columns([1, 3])
kind = c_kind.radio("Along", ["Family", "Kernel file"], key="reg_kind", on_change=_set_scope, horizontal=True)
if kind == "Family":
    options = families["family"].tolist()
    wanted = qp_family
    label = "Family"
else:
    options = paths["path"].tolist()
    wanted = qp_path
    label = "Kernel file"
unknown = bool(wanted) and wanted not in options
if unknown:  # a stale or hand-written link: no other scope's results, but the box to pick one
    st.error(f"No runs with {label.lower()} **{common.md(wanted)}** in {common.store()}.")
if not options:
    st.info(f"No run has a {label.lower()} yet (runs get one with `--family`).")
    st.stop()
key = "reg_family" if kind == "Family" else "reg_path"
if unknown:
    st.session_state[key] = None
elif wanted:
    st.session_state[key] = wanted
else:  # the URL names none: the default (so Back to `regressions` shows it again, not the last pick)
    # The family whose timed runs passed most recently, with at least two of them: a history to show.
    ranked = context.choices(common.read(Store.run_contexts), "family", modes=context.TIMED_MODES, min_passed=2,
                             prefer=None, gpu=common.gpu_filter()) if kind == "Family" else []  # fmt: skip
    st.session_state[key] = next((f for f in ranked if f in options), options[0])
scope_value = c_value.selectbox(label, options, key=key, on_change=_set_scope, placeholder=f"Pick a {label.lower()}")
if scope_value is None:
    st.stop()
scope = {"family": scope_value} if kind == "Family" else {"path": scope_value}

contexts = common.read(Store.history_contexts, **scope)
gpu = common.gpu_filter()
if gpu is not None:
    contexts = contexts[contexts["gpu"] == gpu]
if contexts.empty:
    st.info(f"No timed (benchmark or leaderboard) runs along {label.lower()} **{common.md(scope_value)}**"
            + (f" on {gpu}." if gpu else "."))  # fmt: skip
    st.stop()
many = contexts["problem"].nunique() > 1  # name the problem only when the store holds more than one
ctx_labels = [
    f"{context_name(r['suite'], str(r['gpu']), r['problem'] if many else None)} ({counted(r['runs'], 'run')})"
    for r in contexts.to_dict("records")
]
ctx_records = contexts.to_dict("records")


def _ctx_to_url() -> None:
    """The context picked goes into the URL as `suite` (with `problem` where the store holds several), and `gpu`
    (the sidebar's) only where those leave a choice of GPUs: a link, a reload or Back shows it again."""
    pick = ctx_records[st.session_state["reg_ctx"]]
    params = {"suite": pick["suite"]} | ({"problem": pick["problem"]} if many else {})
    same = [r for r in ctx_records if (r["suite"], r["problem"]) == (pick["suite"], pick["problem"])]
    if len(same) > 1 and isinstance(pick["gpu"], str):
        params["gpu"] = pick["gpu"]
    keep = {k: v for k, v in st.query_params.to_dict().items() if k not in ("suite", "problem", "variant")}
    st.query_params.from_dict(keep | params)  # another context: its own lineage path; one call, one history entry


want = {k: st.query_params.get(k) for k in ("suite", "problem")}
matches = [i for i, r in enumerate(ctx_records) if all(v is None or r[k] == v for k, v in want.items())]
if want["suite"] is not None and not matches:  # a stale or hand-written link: the first context, and say so
    st.warning(
        f"No timed runs along {label.lower()} **{common.md(scope_value)}** in suite “{common.md(want['suite'])}”: "
        f"showing {common.md(ctx_labels[0])}.",
        icon=":material/link_off:",
    )
    st.query_params.pop("suite", None)
    st.query_params.pop("problem", None)
st.session_state["reg_ctx"] = matches[0] if matches else 0
row = common.filter_row()
ctx_idx = row.selectbox("Suite · GPU", range(len(ctx_labels)), format_func=ctx_labels.__getitem__, key="reg_ctx",
                       on_change=_ctx_to_url)  # fmt: skip
window = urlstate.selectbox(row, "History", list(WINDOWS), key="reg_window", param="window", default="last 200 runs",
                            width=170)  # fmt: skip
show_improvements = urlstate.toggle(row, "Also improvements", key="reg_impr", param="improvements", width="content")
ctx = contexts.iloc[ctx_idx or 0]
gpu_value = ctx["gpu"] if isinstance(ctx["gpu"], str) else None

lineage = {}
if kind == "Family":  # one line of descent: a variant's runs and its ancestors', never its siblings'
    nodes = common.read(Store.lineage_nodes, family=scope_value, suite=ctx["suite"], gpu=gpu_value,
                        problem=ctx["problem"] if isinstance(ctx["problem"], str) else None)  # fmt: skip
    leaves = summaries.path_leaves(nodes)
    if leaves:
        # Unique labels: Streamlit keeps a selectbox's choice as its label, so two options named alike would
        # resolve to the other one on the next rerun.
        names = common.variant_labels(nodes)
        by_label = {names.get(s, s[:12]): s for s in leaves}
        # In the URL as `variant` (as `regressions --to`), by its name: a link, a reload and Back show the path
        label = urlstate.selectbox(st, "Lineage path to", list(by_label), key="reg_leaf", param="variant",
                                   help="The history follows this variant and its ancestors (parent links, as on "
                                   "the Lineage page); default: the variant run most recently")  # fmt: skip
        path = summaries.lineage_path(nodes, by_label[label])
        lineage = {"variants": tuple(path)}
        st.caption("Along " + " → ".join(common.md(names[s]) for s in path if s in names))
hist, points, changes = common.history(
    **scope, suite=ctx["suite"], gpu=gpu_value, last=WINDOWS[window], problem=ctx["problem"], **lineage
)  # fmt: skip
history_key = (tuple(scope.items()), ctx["suite"], gpu_value, window, ctx["problem"], tuple(lineage.items()))
runs = hist["runs"]
if runs.empty or not points:
    st.info("No cases recorded along this history.")
    st.stop()

_shared = common.read(Store.shared_device_runs, tuple(runs["run_id"]))
if _shared:
    st.warning(
        f"{len(_shared)} run(s) of this history ran on a shared device (other GPU processes or host load): a change "
        f"point at one of them may be contention. Runs: {', '.join(_shared[:10])}"
    )
kinds = ("regression", "improvement") if show_improvements else ("regression",)
_states = gpustate.change_point_notes(
    changes,
    points,
    gpustate.states_by_run_case(common.read(Store.gpu_states, gpustate.change_point_runs(changes, points))),
)
_states = {k: v for k, v in _states.items() if any(cp.kind in kinds for cp in changes[k[0]] if cp.run_id == k[1])}
if _states:  # a step between two clock states may be the machine's, not the code's
    st.warning("At these change points the GPU's state, not the code, may explain the step (a clock difference or "
               "throttling): " + "; ".join(
        f"**{common.md(case)}** (run {common.code(rid)}): {common.md(note)}" for (case, rid), note in _states.items()
    ))  # fmt: skip
table = analysis.regression_table(changes, points, runs, kinds=kinds)
n_reg = sum(cp.kind == "regression" for cps in changes.values() for cp in cps)
n_imp = sum(cp.kind == "improvement" for cps in changes.values() for cp in cps)
m = common.metric_row()
m.metric("Runs in history", len(runs), width="content")
m.metric("Regressions", n_reg, width="content")
m.metric("Improvements", n_imp, width="content")

st.subheader("Regressions" + (" and improvements" if show_improvements else ""))
if table.empty:
    st.success("No regression detected along this history." if not n_imp or show_improvements else
               f"No regression detected ({n_imp} improvement(s); tick “Also improvements” to list them).")  # fmt: skip
else:
    common.table(
        table,
        column_config={
            "factor": st.column_config.NumberColumn(format="×%.3f"),
            "started": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
            "compare": st.column_config.LinkColumn("compare", display_text="diff ↗"),
        },
        key="reg_table",
    )
    st.caption("A change is a step in a robust piecewise-constant fit of each case's means (tracker.analysis.stats); "
               "“compare” opens the last good run against the run that introduced it. Timeouts and failures are "
               "inconclusive, never regressions.")  # fmt: skip

errs = {
    (rid, label): err
    for rid, label, err in zip(hist["cases"]["run_id"], hist["cases"]["label"], hist["cases"]["err_us"], strict=True)
    if views.is_num(err)
}
frame, spec = cached(charts.timeline_chart, history_key, points, changes, runs, errs)
st.vega_lite_chart(frame, spec, key="timeline", width="stretch")
not_passed = int((runs["status"] != "passed").sum())
if not_passed:
    st.caption(f"{not_passed} run(s) did not pass (grey ×): inconclusive, left out of the change detection.")
