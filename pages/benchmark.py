"""Benchmark: start a tracker run of a kernel file in the background, follow it live, cancel it."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from pages import _common as common
from tracker.capture import jobs
from tracker.capture.envinfo import gpu_available
from tracker.common.vocabulary import DEFAULT_WORKLOAD, RUN_MODES
from tracker.store import Store
from tracker.workloads import cases_for, get_suite, get_workload

BUILT_IN = f"{DEFAULT_WORKLOAD} (built in)"

common.page_setup()
st.title("Run a benchmark")
store = common.store()
_, problem = common.try_read(Store.count_runs)
if problem and "no store" not in problem.lower():
    st.error(problem + " Choose another store in the sidebar.")
    st.stop()
if not common.writable():  # runs and their .jobs/ folder go only into the dashboard's own store
    st.stop()

kernels_dir = jobs.default_kernels_dir()
kernels = jobs.list_kernels(kernels_dir)
has_gpu = gpu_available()
if not has_gpu:
    st.info(
        "No GPU here: the run uses the **CPU** (`--device auto`) and the small **smoke** suite; its timings are "
        "labelled CPU and never compared with GPU runs."
    )

problems_dir = jobs.default_problems_dir()
problems = jobs.list_problems(problems_dir)
problem = None


def _own_kernels(folder: Path | None) -> list[str]:
    """A problem folder's own kernel files (its submission): offered before the kernels/ ones, which solve qr_v2."""
    return [str(folder / k) for k in jobs.list_kernels(folder)] if folder else []


def _first_kernel_of_the_problem() -> None:
    """Another problem chosen: its own kernel first (the kernels/ files solve qr_v2). Set, not just forgotten: a
    browser sends the kernel box's old value with the change, and the old value is among the new choices."""
    picked = st.session_state.get("bm_problem")
    try:
        folder = jobs.resolve_problem(picked, problems_dir) if picked not in (None, BUILT_IN) else None
    except ValueError:
        folder = None  # the page says why when it resolves the problem itself
    first = next(iter(_own_kernels(folder) or kernels), None)
    if first is None:
        st.session_state.pop("bm_kernel", None)
    else:
        st.session_state["bm_kernel"] = first


if problems:  # a choice only when there is more than the built-in problem to choose from
    picked_problem = st.selectbox(
        f"Problem (GPU Mode folders under {problems_dir})", [BUILT_IN, *problems], key="bm_problem",
        on_change=_first_kernel_of_the_problem,
    )  # fmt: skip
    problem = None if picked_problem == BUILT_IN else picked_problem
try:
    problem_path = jobs.resolve_problem(problem, problems_dir) if problem else None
    workload = get_workload(problem_path)
except ValueError as exc:
    st.error(str(exc))
    st.stop()
own = _own_kernels(problem_path)
kernel_choices = [*own, *kernels]
kernel_label = {k: f"{problem}/{Path(k).relative_to(problem_path)} (the problem's own)" for k in own}

c1, c2 = st.columns([3, 2])
choice = c1.selectbox(
    f"Kernel file (under {kernels_dir}{' or the problem folder' if own else ''})", kernel_choices,
    index=0 if kernel_choices else None, key="bm_kernel", format_func=lambda k: kernel_label.get(k, k),
)  # fmt: skip
typed = c2.text_input("…or a path under that folder", key="bm_path", placeholder="e.g. my_variant.py")
c3, c4, c5 = st.columns(3)
suites = list(workload.suites) if has_gpu else ["smoke"]
suite = c3.selectbox("Suite", suites, key="bm_suite", disabled=not has_gpu)
mode = c4.selectbox("Mode", RUN_MODES, index=RUN_MODES.index("benchmark"), key="bm_mode")
device = c5.selectbox("Device", ["auto", "cpu", "cuda"] if has_gpu else ["auto", "cpu"], key="bm_device")
suite_cases = cases_for(get_suite(workload, suite), mode)
with st.expander("Options"):
    o1, o2 = st.columns(2)
    picked = o1.multiselect(
        f"Only these cases (default: all {len(suite_cases)})",
        list(range(len(suite_cases))),
        format_func=lambda i: f"{i}: {suite_cases[i].spec}",
        key="bm_cases",
    )
    seed_text = o2.text_input("Hidden seed (optional)", key="bm_seed")
    family = o1.text_input("Family", key="bm_family")
    parent = o2.text_input("Parent run id", key="bm_parent")
    note = st.text_input("Note / hypothesis", key="bm_note")
    t1, t2, t3 = st.columns(3)
    timeout = t1.number_input("Timeout (s)", min_value=1.0, value=jobs.DEFAULT_TIMEOUT_S, step=60.0, format="%.0f",
                              key="bm_timeout", help="The timed work, after compiling (--timeout)")  # fmt: skip
    compile_timeout = t2.number_input(
        "Compile budget (s)",
        min_value=1.0,
        value=jobs.DEFAULT_COMPILE_TIMEOUT_S,
        step=60.0,
        format="%.0f",  # whole seconds, as the CLI's defaults read
        key="bm_compile",
        help="Import and the first call (Triton JIT, extension builds), before the timeout starts "
        "(--compile-timeout); a kernel that hangs in its first call holds the device this long",
    )
    profile = t3.checkbox("Profile one call per case", key="bm_profile")
    ncu = t3.checkbox(
        "Nsight Compute profile of one call per case (where ncu is installed)",
        key="bm_ncu",
        help="After the timed run: per kernel duration, occupancy, SM and memory throughput, registers, shared "
        "memory and top stall reasons. Its time counts against the timeout. In the sandbox only where Linux keeps "
        "a process out of its parent's memory (Yama's ptrace_scope 1 or more); elsewhere the run says so.",
    )
    a1, a2, a3 = st.columns([2, 3, 1])
    paired = a1.checkbox(
        "Paired A/B against a baseline",
        key="bm_ab",
        help="As `ab BASELINE KERNEL`: the two interleaved on one device, round by round on the same inputs, each "
        "case judged by a paired test (benchmark mode only; the family, parent and note are the kernel's)",
    )
    baseline = a2.selectbox("Baseline (A)", kernel_choices, index=None, key="bm_ab_baseline", disabled=not paired,
                            format_func=lambda k: kernel_label.get(k, k))  # fmt: skip
    rounds = int(a3.number_input("Rounds", min_value=2, value=jobs.DEFAULT_ROUNDS, step=1, key="bm_ab_rounds",
                                 disabled=not paired))  # fmt: skip
    g1, g2 = st.columns(2)
    gpu_mode = g1.selectbox(
        "GPUs (a queue on a local Dask cluster, one worker per GPU)",
        ["this process (no queue)", "all", "N workers", "these GPU ids"]
        if has_gpu
        else ["this process (no queue)", "N workers"],
        key="bm_gpus_mode",
    )
    gpus = {"all": "all"}.get(gpu_mode)
    if gpu_mode == "N workers":
        gpus = str(int(g2.number_input("N", min_value=1, max_value=64, value=1, step=1, key="bm_gpus_n")))
    elif gpu_mode == "these GPU ids":
        gpus = g2.text_input("GPU ids", key="bm_gpus_ids", placeholder="e.g. 0,2").strip().replace(" ", "")
        gpus = gpus if "," in gpus else (gpus + "," if gpus else None)
submitted = st.button("Start run", type="primary", key="bm_start")

if submitted:
    kernel = typed.strip() or choice
    case_list = sorted(picked) or None
    try:
        seed = int(seed_text) if seed_text.strip() else None
    except ValueError:
        seed = None
        st.error(f"The seed must be a whole number; got “{seed_text}”.")
    if paired and not baseline:
        st.error("Choose the baseline (A) of the A/B session.")
    elif kernel and (not seed_text.strip() or seed is not None):
        try:
            job = jobs.start_job(
                store, kernel, suite=suite if has_gpu else "smoke", mode=mode, kernels_dir=kernels_dir,
                cases=case_list, seed=seed, timeout=timeout, family=family.strip() or None,
                parent=parent.strip() or None, note=note.strip() or None, profile=profile, ncu=ncu, device=device,
                problem=problem, problems_dir=problems_dir, gpus=gpus, compile_timeout=compile_timeout,
                ab_baseline=baseline if paired else None, rounds=rounds,
            )  # fmt: skip
        except (ValueError, OSError) as exc:
            st.error(str(exc))
        else:
            st.session_state["bm_job"] = job.job_id
            st.success(
                f"Started job {job.job_id}: {job.spec['kernel']} · {job.spec['problem']} · {job.spec['suite']}/{mode}"
            )
    elif not kernel:
        st.error("Choose a kernel file.")


def _render_job(job: jobs.Job, s: dict) -> None:
    """One job as jobs.status() read it (s), read once a tick by job_list."""
    state = s["state"]
    total, done = s["total"] or 0, s["done"] or 0
    md = common.md  # a job's kernel path and cases are this machine's; its error may quote stored text
    ab = job.spec.get("ab")
    against = f" against **{ab['a']}** ({ab['rounds']} rounds, A/B)" if ab else ""
    head = f"**{job.spec.get('kernel')}**{against} · {s['suite']}/{s['mode']} · job `{job.job_id}`"
    elapsed = f"{s['elapsed_s']:.0f} s" if s.get("elapsed_s") is not None else "–"
    if state in jobs.ACTIVE_STATES:
        current = f" — now: {s['current']}" if s["current"] else ""
        st.markdown(f"{head} · **{state}** · elapsed {elapsed}")
        if s.get("phase") == "waiting" and s.get("waiting_for"):
            text = s["waiting_for"]
        elif s.get("phase") == "compiling":
            budget, quiet = jobs.compile_budget_s(job), s.get("quiet_s") or 0.0
            text = f"compiling (import and first call): {quiet:.0f} s of its {budget:.0f} s budget"
            if jobs.first_call_stalled(job, s):
                left = max(budget - quiet, 0)
                text = (f"no progress: the first call has not returned after {quiet:.0f} s; the compile budget "
                        f"ends in {left:.0f} s (the device stays held until then; Cancel frees it)")  # fmt: skip
        elif total:
            text = f"case {min(done + 1, total)} of {total}{current}" + (
                f" · {s['failed']} failed" if s["failed"] else ""
            )
        else:
            text = "starting the worker (imports torch, generates inputs)…"
        st.progress(min(done / total, 1.0) if total else 0.0, text=text)  # never past its end, whatever the file says
        if state != "cancelling" and st.button("Cancel", key=f"cancel_{job.job_id}"):
            jobs.cancel(store, job.job_id)
            st.warning("Cancelling…")
    elif state == "finished":
        text = f"{head} · finished: **{s['status']}** in {elapsed}" + (f" · {md(s['error'])}" if s.get("error") else "")
        (st.success if s["status"] == "passed" else st.warning)(text)
        if s.get("a_runs") and s.get("b_runs"):  # an A/B session: its verdict is on Compare
            common.compare_link(s["a_runs"][0], s["b_runs"][0], f"compare the pair {s['pair_id']}")
        elif s.get("run_id"):
            common.run_link(s["run_id"], f"open run {s['run_id']}")
    else:
        st.error(f"{head} · the job ended without recording a run: {md(s.get('error'))}")
    tail = jobs.log_tail(job, 3000)
    if tail.strip():
        st.code(tail, language="text")


@st.fragment(run_every=1)
def job_list() -> None:
    """The dashboard's jobs, read from disk every second: progress while one runs, then how it ended. This fragment
    draws a job's end itself, so it never waits on a full rerun (under CI load the page once had not shown a
    job's end 30 s after it); the full rerun that follows an end refreshes the rest of the page (the sidebar's
    run count, the form's parents)."""
    all_jobs = jobs.list_jobs(store, limit=20)
    states = {j.job_id: jobs.status(j) for j in all_jobs}  # once a tick: each reads the job's files
    active = [j for j in all_jobs if states[j.job_id]["state"] in jobs.ACTIVE_STATES]
    for job in active:
        _render_job(job, states[job.job_id])
    if not all_jobs:
        st.caption("No job started from the dashboard for this store yet.")
    recent = [j for j in all_jobs if j not in active][:5]
    focus = st.session_state.get("bm_job")
    for job in recent:
        s = states[job.job_id]  # a finished job's header says how it ended: "finished" read the same for a failed run
        with st.expander(
            f"{job.job_id} · {job.spec.get('kernel')} · {s['state']}"
            + (f" ({s['status']})" if s.get("status") else ""),
            expanded=job.job_id == focus or job is recent[0],
        ):
            _render_job(job, s)
    running = {j.job_id for j in active}
    ended = st.session_state.get("bm_running", set()) - running
    st.session_state["bm_running"] = running
    if ended:
        st.rerun()


def _run_text(entry: dict | None) -> str:
    """A run in the device queue: a link when it is a run of the open store, else who it is (another store's)."""
    if not entry:
        return "free"
    run_id = str(entry.get("run_id") or "")
    found, _ = common.try_read(Store.resolve_run_id, run_id) if run_id else (None, None)
    if found == run_id:
        return f"[run {run_id}](run?id={run_id}) (pid {entry.get('pid')})"
    return f"a run of another store (pid {entry.get('pid')})"


@st.fragment(run_every=2)
def device_queue() -> None:
    """Who holds each device now and who waits, across CLI and dashboard runs; read again every 2 s."""
    queue = jobs.device_queue()
    for entry in queue:
        waits = ", ".join(_run_text(w) for w in entry["waiting"]) or "none"
        st.info(f"Device **{common.md(entry['device'])}**: {_run_text(entry['holder'])} · waiting: {waits}",
                icon=":material/queue:")  # fmt: skip
    if not queue:
        st.caption("Every device is free: no run holds one or waits for one.")


st.subheader("Jobs")
device_queue()
job_list()
