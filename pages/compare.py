"""Compare: run A against run B, case by case, with their source and git diffs. Shareable as compare?a=..&b=.."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages import _common as common
from pages.ui import charts, diffs
from pages.ui import tables as views
from tracker.analysis import gpustate, series, spread
from tracker.common.gitinfo import diff_commits
from tracker.common.vocabulary import DEFAULT_WORKLOAD, SHARED_DEVICE_NOTE
from tracker.store import Store

common.page_setup()
st.title("Compare")
common.require_runs()


def _to_url(side: str, key: str) -> None:
    """A run typed or picked for a side goes into the URL with st.query_params, which pushes a browser history
    entry: Back returns to the pair before. (A widget bound to the URL only replaces the current entry.)"""
    value = (st.session_state.get(key) or "").strip()
    if value:
        st.query_params[side] = value
    else:
        st.query_params.pop(side, None)


recent = common.read(Store.run_choices, gpu=common.gpu_filter(), limit=300)
labels = {r["run_id"]: views.run_choice(r, when=True) for r in recent.to_dict("records")}
# The URL is the source of truth: compare?a=X&b=Y, or Back to it, shows X and Y in the boxes and the pickers.
typed_a, typed_b = st.query_params.get("a", ""), st.query_params.get("b", "")
st.session_state["a"], st.session_state["b"] = typed_a, typed_b
col_a, col_b = st.columns(2)
hint = "run id, unique prefix or variant name"
col_a.text_input("Run A (baseline)", key="a", on_change=_to_url, args=("a", "a"), placeholder=hint)
col_b.text_input("Run B (candidate)", key="b", on_change=_to_url, args=("b", "b"), placeholder=hint)
with st.expander("Pick from recent runs", expanded=not (typed_a and typed_b)):
    pa, pb = st.columns(2)
    options = list(labels)
    for side, typed in (("a", typed_a), ("b", typed_b)):
        st.session_state[f"pick_{side}"] = typed if typed in labels else None
    pa.selectbox("A", options, format_func=labels.get, key="pick_a", on_change=_to_url, args=("a", "pick_a"))
    pb.selectbox("B", options, format_func=labels.get, key="pick_b", on_change=_to_url, args=("b", "pick_b"))

a = common.resolve_run(typed_a)
b = common.resolve_run(typed_b)
if not (a and b):
    if not (typed_a and typed_b):
        st.info("Choose a baseline run A and a candidate run B (or open a URL like `compare?a=<run>&b=<run>`).")
    st.stop()

bundle_a, bundle_b, cmp = common.compare(a, b)
if bundle_a is None or bundle_b is None:
    st.error("One of the runs disappeared from the store; reload the page.")
    st.stop()
run_a, run_b = bundle_a["run"], bundle_b["run"]
md = common.md  # every stored value below goes into Markdown through it: shown as text, never as links or HTML
if run_a["run_id"] == run_b["run_id"]:
    st.info("A and B are the same run: every ratio is 1 and says nothing about noise. Pick another run for B.")


def _header(col, side: str, run: dict) -> None:
    col.markdown(
        f"**{side}: {md(run['variant'])}** · {common.code(run['run_id'])} · {md(run['status'])}  \n"
        f"{md(run.get('path') or '?')}  \n"
        f"{md(run.get('gpu') or '?')} · {md(run['suite'])}/{md(run['mode'])} · {run['started_at']:%Y-%m-%d %H:%M} · "
        f"commit {common.code(views.short_commit(run.get('git_commit')))}"
        + (" (dirty)" if run.get("git_dirty") is True and isinstance(run.get("git_commit"), str) else "")
    )
    with col:
        common.run_link(run["run_id"], f"open run {run['run_id']}")


h = st.columns(2)
_header(h[0], "A", run_a)
_header(h[1], "B", run_b)

if (run_a.get("gpu") or "?") != (run_b.get("gpu") or "?"):
    st.warning(
        f"Different GPUs: A ran on **{md(run_a.get('gpu') or 'unknown')}**, "
        f"B on **{md(run_b.get('gpu') or 'unknown')}**. "
        "Timings of different GPU models are not compared; only the sources are."
    )
_shared = common.read(Store.shared_device_runs, (run_a["run_id"], run_b["run_id"]))
if _shared:
    _sides = " and ".join(side for side, r in (("A", run_a), ("B", run_b)) if r["run_id"] in _shared)
    st.warning(f"{_sides} {SHARED_DEVICE_NOTE}.")
_pair_id = series.session_pair(run_a, run_b)
_paired = None  # the session's per-case verdicts, where A and B are one A/B session's runs
if _pair_id is not None:
    _paired = series.paired_cases(common.read(Store.pair_runs, _pair_id))  # the session's verdict, over all its rounds
    st.info(f"A and B are runs of one interleaved A/B session ({common.code(_pair_id)}): each case is judged by a "
            "paired t-test on the per-round ratios B/A, which cancels the machine's drift between rounds.")  # fmt: skip
    common.table(
        [{"": c.mark, "case": c.case, "rounds": c.rounds, "B/A": c.ratio or c.single_round_ratio,
          "95% CI": "–" if c.ci_low is None else f"{c.ci_low:.3f}–{c.ci_high:.3f}", "verdict": c.verdict,
          "why": c.reason + ("; B/A is its one round's" if c.single_round_ratio else "")} for c in _paired],
        key="paired", column_config={"B/A": st.column_config.NumberColumn(format="%.3f")},
    )  # fmt: skip
_spread = [] if _paired is not None else spread.compare_notes(bundle_a["cases"], bundle_b["cases"])
if _spread:  # two processes' host pace, not the code, on launch-bound cases
    st.warning("How far each run's mean sits above its best repetition moves between processes on launch-bound "
               "cases, and may explain these rather than the code: "
               + "; ".join(f"**{md(n['case'])}**: {md(n['note'])}" for n in _spread[:12]))  # fmt: skip
_states = gpustate.compare_notes(bundle_a["cases"], bundle_b["cases"])
if _states:  # clocks or throttling, not the code, may explain these cases
    st.warning("The GPU's state, not the code, may explain these cases (a clock difference or throttling): "
               + "; ".join(f"**{md(n['case'])}**: {md(n['note'])}" for n in _states[:12]))  # fmt: skip
problem_a, problem_b = run_a.get("problem") or DEFAULT_WORKLOAD, run_b.get("problem") or DEFAULT_WORKLOAD
if problem_a != problem_b:
    st.warning(
        f"Different problems: A was judged by **{md(problem_a)}**, B by **{md(problem_b)}**. Their timings are not "
        "compared; only the sources are."
    )
elif run_a.get("problem_sha256") and run_b.get("problem_sha256") and run_a["problem_sha256"] != run_b["problem_sha256"]:
    st.warning(f"The files of problem **{md(problem_a)}** changed between the runs: the cases may not be the same.")
cover = series.coverage(cmp, run_a, run_b)
if cover["line"]:
    st.info(md(cover["line"]))

not_passed = [
    f"{side} is **{md(run['status'])}**" for side, run in (("A", run_a), ("B", run_b)) if run["status"] != "passed"
]
if not_passed:
    st.warning(
        f"{' and '.join(not_passed)}: a run that did not pass is no baseline. A timeout or a failure is "
        "inconclusive; the ratios below cover only the cases it did time and say nothing about the variant."
    )
m = common.metric_row()
if cmp.geomean_ratio is not None:
    ci = f" (95% CI {cmp.geomean_ci[0]:.3f}–{cmp.geomean_ci[1]:.3f})" if cmp.geomean_ci else ""
    m.metric("Geomean ratio B/A", f"{cmp.geomean_ratio:.3f}", help=f"mean_B / mean_A {md(cover['ratio_over'])}; "
             "< 1: B is faster", width="content")  # fmt: skip
    st.caption(f"Geomean ratio {md(cover['ratio_over'])}.")
    m.metric("Speedup of B", f"{1 / cmp.geomean_ratio:.3f}×", help="A time / B time" + ci, width="content")
else:
    m.metric("Geomean ratio B/A", "–", width="content")
    m.metric("Speedup of B", "–", width="content")
# a pair's counts are its paired verdicts, as the table above: the two runs' own test, below, sees one round each
_verdicts = [c.verdict for c in (_paired if _paired is not None else cmp.cases)]
counts = {v: sum(x == v for x in _verdicts) for v in ("faster", "slower", "same", "n/a")}
_by = " (paired)" if _paired is not None else ""
m.metric(f"Cases faster / slower{_by}", f"{counts['faster']} / {counts['slower']}", width="content")
m.metric(f"Within noise / n/a{_by}", f"{counts['same']} / {counts['n/a']}", width="content")
_these = "The table below compares these two runs alone (unpaired): " if _paired is not None else ""
st.caption(
    f"{_these}{md(cmp.reason)}. Marks as in `asv compare`: `-` faster, `+` slower, `~` within noise, `x` not "
    "comparable."
)

table = views.compare_table(cmp, bundle_a, bundle_b)
common.table(
    table,
    column_config={
        "ratio B/A": st.column_config.NumberColumn(format="%.3f"),
        "p": st.column_config.NumberColumn(format="%.2g"),
    },
    key="cmp_table",
    height=common.rows_height(len(table)),
)

if cmp.comparable and any(c.ratio for c in cmp.cases):
    st.vega_lite_chart(*charts.grouped_bars_chart(cmp, bundle_a, bundle_b), key="bars")
    st.vega_lite_chart(*charts.speedup_chart(cmp), key="speedup")

st.subheader("Source diff")
name_a = f"A {run_a.get('path') or run_a['variant']} ({run_a['variant_sha256'][:8]})"
name_b = f"B {run_b.get('path') or run_b['variant']} ({run_b['variant_sha256'][:8]})"
if run_a["variant_sha256"] == run_b["variant_sha256"]:
    st.info("A and B ran the same source (same content hash).")
elif not (bundle_a["source"] and bundle_b["source"]):
    st.info("The source of one of the variants is not in the store.")
else:
    # Folded: two full diffs would make the page many screens tall.
    with st.expander(f"Source diff of {md(run_a['variant'])} and {md(run_b['variant'])}", expanded=False):
        t_unified, t_side = st.tabs(["Unified", "Side by side"])
        with t_unified:
            st.code(diffs.unified_diff(bundle_a["source"], bundle_b["source"], name_a, name_b), language="diff")
        with t_side:
            st.html(diffs.side_by_side_html(bundle_a["source"], bundle_b["source"], name_a, name_b))


@st.cache_data(show_spinner=False, max_entries=32)
def _git_diff(repo: str, commit_a: str, commit_b: str, paths: tuple[str, ...]) -> str | None:
    return diff_commits(repo, commit_a, commit_b, list(paths) or None) if Path(repo).is_dir() else None


commit_a, commit_b = run_a.get("git_commit"), run_b.get("git_commit")
short_a, short_b = views.short_commit(commit_a), views.short_commit(commit_b)
st.subheader("Git")
if isinstance(commit_a, str) and isinstance(commit_b, str):
    if commit_a == commit_b:
        st.caption(f"Both runs are at commit {common.code(short_a)}.")
    else:
        # Git runs only in a repository named here (by default the dashboard's own working folder), never in
        # the `git_repo` a run recorded: an imported run may name any folder, with any .git/config.
        repo = st.text_input(
            "Repository for the git diff", value=str(Path.cwd()), key="git_repo_here",
            help="A git checkout on this machine that holds both commits. The runs' recorded repositories are "
            "not used: they are data, possibly from another machine.",
        ).strip()  # fmt: skip
        only_kernels = st.toggle("Only the kernel files", value=True)
        paths = diffs.kernel_paths_in_repo([run_a.get("path"), run_b.get("path")], run_a.get("git_repo"))
        text = _git_diff(repo, commit_a, commit_b, tuple(paths) if only_kernels else ()) if repo else None
        if text is None:
            st.info(f"Commits {common.code(short_a)} and {common.code(short_b)} are not both in a repository here.")
        elif not text.strip():
            st.caption(
                f"No changes between {common.code(short_a)} and {common.code(short_b)}"
                + (" in the kernel files." if only_kernels else ".")
            )
        else:
            with st.expander(f"`git diff {short_a} {short_b}` in {common.md(repo)}", expanded=False):
                st.code(text, language="diff")
else:
    st.caption("At least one of the runs was not recorded in a git repository.")
for side, run in (("A", run_a), ("B", run_b)):
    if isinstance(run.get("git_diff"), str) and run["git_diff"].strip():
        with st.expander(f"Uncommitted changes of {side} ({run['run_id']})"):
            st.code(run["git_diff"], language="diff")
