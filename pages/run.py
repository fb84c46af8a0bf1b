"""Run: one run's cases, samples, profile, source, git state, environment, and a verdict form."""

from __future__ import annotations

import streamlit as st

from pages import _common as common
from pages.ui import charts
from pages.ui import tables as views
from tracker.analysis import margins
from tracker.analysis import series as analysis
from tracker.common.jsonfields import parse_flags
from tracker.common.vocabulary import DEFAULT_WORKLOAD, REPORT_NOT_HERE
from tracker.store import VERDICTS, Store, StoreLockedError

# Times keep common.table's format (0.1 µs, thousands separators), as in the per-case table beside.
PROFILE_KERNEL_COLUMNS = {
    "kernel": st.column_config.TextColumn("kernel", help="Short name; the whole signature is in the last column"),
    "full name": st.column_config.TextColumn("full name", width="large"),
}

common.page_setup()
st.title("Run")
common.require_runs()


def _to_url(key: str) -> None:
    """A run chosen (typed or picked) goes into the URL with st.query_params, which pushes a browser history
    entry: Back returns to the run before. (A widget bound to the URL only replaces the current entry.)"""
    value = (st.session_state.get(key) or "").strip()
    if value:
        st.query_params["id"] = value
    else:
        st.query_params.pop("id", None)


# The URL is the source of truth: opening run?id=X, or Back to it, shows X in the box and the picker.
typed = st.query_params.get("id", "")
st.session_state["id"] = typed
st.text_input(
    "Run id", key="id", on_change=_to_url, args=("id",), placeholder="a run id, a unique prefix or a variant name"
)
run_id = common.resolve_run(typed)
find = st.text_input("Search runs", key="run_search", placeholder="variant, path, family, note or run id")
recent = common.read(Store.run_choices, gpu=common.gpu_filter(), limit=500, search=find or None)
choices = dict.fromkeys(([run_id] if run_id else []) + recent["run_id"].tolist())
_rows = {r["run_id"]: r for r in recent.to_dict("records")}


def _choice_label(rid: str) -> str:
    r = _rows.get(rid)
    if r is None:
        return rid
    return views.run_choice(r)


st.session_state["run_pick"] = run_id
st.selectbox(
    "Open a run", list(choices), format_func=_choice_label, key="run_pick", on_change=_to_url,
    args=("run_pick",), placeholder=f"{len(recent)} recent runs" + (f" matching “{find}”" if find else ""),
)  # fmt: skip
if run_id is None:
    if not typed:
        st.info("Give a run id above, or open one of the recent runs:")
    common.table(
        views.readable(recent.assign(run_id="run?id=" + recent["run_id"])),
        column_config={"run": st.column_config.LinkColumn("run", display_text=r"run\?id=(.*)")},
    )
    st.stop()

bundle = common.read(Store.run_bundle, run_id)
if bundle is None:  # deleted between the two reads
    st.error(f"No run {run_id} in {common.store()}.")
    st.stop()
run, cases = bundle["run"], bundle["cases"]

status_icon = {"passed": ":green[:material/check_circle:]", "failed": ":red[:material/cancel:]"}.get(
    run["status"], ":orange[:material/warning:]"
)
md = common.md  # every stored value below goes into Markdown through it: shown as text, never as links or HTML
st.subheader(f"{status_icon} {md(run['variant'])} · {md(run['status'])}")
st.caption(
    f"{md(run.get('path') or '?')} · run {common.code(run['run_id'])} · "
    f"problem **{md(run.get('problem') or DEFAULT_WORKLOAD)}** · "
    f"suite **{md(run['suite'])}** · "
    f"mode **{md(run['mode'])}** · {md(run.get('gpu') or '?')} · "
    f"started {run['started_at']:%Y-%m-%d %H:%M:%S} · trigger {md(run.get('trigger') or '?')}"
    + (f" · family **{md(run['family'])}**" if isinstance(run.get("family"), str) else "")
)
if run["status"] == "pending":
    st.info(
        f"This run finished but waits in the side file {common.code(run.get('side_file'))} (the store was busy "
        "or could not "
        "be written); the next run or `python -m tracker import` writes it into the store."
    )
elif run["status"] == "crashed" and (run.get("error") is None or run.get("error") != run.get("error")):
    st.warning("The process recording this run is gone: the run crashed before it was completed.")
if run.get("gpu") == "CPU" or run.get("device") == "cpu":
    st.info("CPU run: timings are CPU timings, never compared with GPU runs.")
if isinstance(run.get("note"), str) and run["note"]:
    _head, _rest = common.head_and_rest(run["note"])
    st.markdown(f"**Note / hypothesis:** {md(_head)}" + (" …" if _rest else ""))
    if _rest:
        with st.expander(f"The rest of the note ({len(_rest):,} characters)"):
            st.markdown(md(_rest))
if isinstance(run.get("error"), str) and run["error"]:
    _failed = cases[(cases["passed"] == False) & cases["message"].notna()] if not cases.empty else cases  # noqa: E712
    _first = _failed.iloc[0] if not _failed.empty else None
    _why = (  # the first failed case's own words, where the run's error only names the cases
        f"  \nFirst failure, {md(_first['spec'])}: {md(str(_first['message'])[:600])}"
        if _first is not None and str(_first["message"]) and str(_first["message"]) not in run["error"]
        else ""
    )
    st.error(md(run["error"]) + _why)
if isinstance(run.get("warnings"), str) and run["warnings"]:
    st.warning(md(run["warnings"]))
_flags, _readable = parse_flags(run.get("flags"))
if not _readable:  # a store written before import checked JSON columns
    st.warning("This run's scan flags are not readable (malformed JSON in the store); not shown.")
for _flag in _flags:  # static-scan flags beside the verdict: reasons to look before trusting it
    _show = st.warning if _flag.get("severity", "hack") == "hack" else st.info
    _show(f"Flag **{md(_flag['code'])}** (line {_flag.get('line')}): {md(_flag['message'])}", icon=":material/flag:")
if run.get("shared_device") is True:
    st.warning("This run shared its device with other work (GPU processes or host load): timings may be contended.")
_sandbox = run.get("sandbox")  # None: recorded before the worker was sandboxed
if isinstance(_sandbox, str) and _sandbox.startswith(("off", "none")):
    st.error(f"The kernel ran without a sandbox ({md(_sandbox)}): it could reach this user's files and processes.")
elif isinstance(_sandbox, str):
    st.caption(f"Kernel contained by {md(_sandbox)}; outputs judged by a separate checker process.")
if run.get("compile_cache") == "warm":  # NULL (older runs), cold and off all compiled from nothing
    st.caption("Compiled from this source's cache (what an earlier run of the same file compiled): not a cold start.")
# Over every run and seed of the variant: passing close to a gate today may fail on a hidden seed tomorrow.
_margin = common.gate_margins([run["variant_sha256"]]).get(run["variant_sha256"])
if _margin and _margin["near"]:
    st.warning(common.md(margins.closest_text(_margin["closest"])), icon=":material/speed:")

progress = views.run_progress(run, cases)
m = common.metric_row()
_geomean = run.get("geomean_us")
if analysis.is_num(_geomean):
    m.metric("Geomean", f"{views.fmt_us(_geomean)} µs", width="content")
else:  # a test-mode run times nothing; a benchmark run without every case timed has no score
    m.metric("Geomean", "untimed" if run["mode"] == "test" else "–", width="content")
m.metric("Cases passed", f"{progress['passed']} / {progress['of']}", width="content")
_commit = run.get("git_commit") if isinstance(run.get("git_commit"), str) else None  # NULL reads as NaN here
m.metric("Commit", views.short_commit(_commit), help=_commit, width="content")
if isinstance(run.get("parent_run"), str) and run["parent_run"]:
    with m:
        parent = common.read(Store.get_run, run["parent_run"]) or {}  # its name; the id stays in the link and tooltip
        st.page_link("pages/compare.py", label=f"vs parent {parent.get('variant') or run['parent_run']}",
                     icon=":material/compare_arrows:", help=f"compare with run {run['parent_run']}",
                     query_params={"a": run["parent_run"], "b": run["run_id"]})  # fmt: skip

said = "; ".join(filter(None, [progress["line"], progress["no_geomean"] and f"no geomean: {progress['no_geomean']}"]))
if said:
    st.caption(md(said[:1].upper() + said[1:] + "."))  # a case's spec is stored text: escaped
tabs = st.tabs(["Cases", "Samples", "Profile", "Source", "Git", "Environment", "Verdict"])

with tabs[0]:
    if cases.empty:
        st.info("This run recorded no cases.")
    else:
        common.table(
            views.run_case_table(cases, run),
            column_config={
                "GFLOP/s": st.column_config.NumberColumn(format="localized"),
                "GB/s": st.column_config.NumberColumn(format="localized"),
                "factor res": st.column_config.NumberColumn(format="%.3g"),
                "tril res": st.column_config.NumberColumn(format="%.3g"),
                "recon res": st.column_config.NumberColumn(format="%.3g"),
                "orth res": st.column_config.NumberColumn(format="%.3g"),
            },
            key="cases",
            height=common.rows_height(len(cases)),
        )
        st.caption("Rates use the work per call that the workload records (qr_v2: 4/3 n³ + 2n² + 14n/3 flops per "
                   "matrix, times the batch; a problem folder records none). Residuals are scaled.")  # fmt: skip
    evidence = common.read(Store.run_evidence, run_id)
    if not evidence.empty:
        st.markdown("**Evidence of failed checks** (the worst matrix; judge it again with `python -m tracker recheck`)")
        common.table(views.evidence_table(evidence), key="evidence")
        for row in evidence.itertuples():
            blob = common.read(Store.evidence_arrays, run_id, int(row.case_idx)) if row.arrays_bytes else None
            if blob:
                st.download_button(
                    f"Download case {row.case_idx}: input, H, tau (.npz)",
                    blob,
                    file_name=f"{run_id}-case{row.case_idx}-evidence.npz",
                    mime="application/octet-stream",
                    key=f"evidence_{row.case_idx}",
                )

with tabs[1]:
    per_case = analysis.samples_by_case(cases, bundle["samples"])
    if any(per_case.values()):
        st.vega_lite_chart(*charts.box_chart(per_case), key="box", width="stretch")
    else:
        st.info("No timed samples (a test-mode run, or no case finished).")

with tabs[2]:
    prof = views.profile_tables(bundle["profile_cases"], bundle["profile_kernels"])
    if prof["kernels"].empty and prof["cases"].empty:
        st.info("Not profiled. Run with `--profile` (or tick Profile on the Benchmark page).")
    else:
        left, right = st.columns([3, 2])
        with left:
            st.markdown("**Top kernels** (all profiled cases; a name's whole signature on hover)")
            st.html(views.hover_table_html(prof["kernels"], {"kernel": "full name"}))
        with right:
            st.markdown("**Per case: launches and host time**")
            common.table(prof["cases"])
    st.markdown("**Nsight Compute** (one call per case)")
    if bundle["ncu_cases"].empty:
        st.info("No Nsight Compute profile. Run with `--ncu` where ncu is installed (or tick it on Benchmark).")
    else:
        if not bundle["ncu_kernels"].empty:
            common.table(views.ncu_table(bundle["ncu_kernels"]), column_config=PROFILE_KERNEL_COLUMNS)
        here = Store(common.store())
        for row in bundle["ncu_cases"].itertuples():
            report = row.report if isinstance(row.report, str) and row.report else None  # NULL reads as NaN here
            kept = here.ncu_report_file(run_id, report)
            said = f"report {common.code(str(kept))}" if kept else f"report {common.code(report)} {REPORT_NOT_HERE}"
            why = f" · {common.md(row.error)}" if isinstance(row.error, str) and row.error else ""
            st.caption(f"case {row.case_idx}: {said if report else 'no report'}{why}")

with tabs[3]:
    if bundle["source"]:
        st.caption(f"{md(run.get('path'))} · sha256 {md(run['variant_sha256'][:16])}")
        st.code(bundle["source"], language="python", line_numbers=True)
    else:
        st.info("The source of this variant is not in the store.")

with tabs[4]:
    if isinstance(run.get("git_commit"), str):
        dirty = " (dirty)" if run.get("git_dirty") else ""
        repo = run.get("git_repo")  # not recorded for runs made on a machine without the checkout's remote
        st.markdown(
            (f"Repository {common.code(repo)} · " if isinstance(repo, str) and repo else "")
            + f"branch {common.code(run.get('git_branch') or 'detached')} · "
            f"commit {common.code(run['git_commit'])}{dirty}"
        )
    else:
        st.info("Not recorded in a git repository.")
    if isinstance(run.get("git_diff"), str) and run["git_diff"]:
        st.markdown("**Uncommitted changes at the time of the run**")
        st.code(run["git_diff"], language="diff")
    elif isinstance(run.get("git_commit"), str):
        st.caption("No uncommitted changes.")

with tabs[5]:
    common.table(
        views.environment_rows(run),
    )
    if isinstance(run.get("log_tail"), str) and run["log_tail"].strip():
        st.markdown("**Worker log tail**")
        st.code(run["log_tail"], language="text")

with tabs[6]:
    # Said here, where the form was: above the tabs it would move them, and the browser would show the first tab.
    flash = st.session_state.pop("kb_verdict_flash", None)
    if flash:
        st.success(flash)  # the reason in it is escaped where the flash is made
    verdicts = bundle["verdicts"]
    if not verdicts.empty:
        common.table(views.readable(verdicts.drop(columns="run_id")))
    if common.writable():  # on any other store no form is drawn, so no submission can be handled either
        with st.form("verdict"):
            # No verdict preselected: a click on "Record" alone must not record one.
            verdict = st.radio("Verdict on this variant", VERDICTS, index=None, horizontal=True, key="verdict_choice")
            reason = st.text_input("Reason", max_chars=500, key="verdict_reason")
            submitted = st.form_submit_button("Record verdict", key="verdict_submit")
            if submitted and verdict is None:
                st.error("Choose a verdict first.")
            elif submitted:
                try:
                    Store(common.store()).add_verdict(run_id, verdict, reason)
                except StoreLockedError:
                    st.error("The store stayed locked by another process; try again in a moment.")
                except (KeyError, ValueError) as exc:
                    st.error(str(exc.args[0] if exc.args else exc))
                else:
                    st.session_state["kb_verdict_flash"] = f"Recorded: {verdict}" + (
                        f" — {md(reason)}" if reason else ""
                    )
                    st.rerun()
