"""Isolation: each run is a spawned worker; a variant that raises, returns garbage, hangs, exits, segfaults or
mutates its input is recorded with its error text and output tail, the tracker survives, and the next run works.

Variants are the small files in tests/variants/. Every outcome is checked against what the store holds afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import HANG_SLEEP, wait_no_process
from tracker.capture.runner import RunOutcome, RunRequest, run_variant
from tracker.store import Store
from tracker.workloads import get_workload
from tracker.workloads.base import SMOKE_MAX_REPS
from tracker.workloads.qr_v2.suites import QR_V2, SMOKE, hidden_seed

QR_CHECK = get_workload("qr_v2").check_outputs

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = Path(__file__).resolve().parent / "variants"
REFERENCE = ROOT / "kernels" / "geqrf_reference.py"


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (a container's init may not reap orphans)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def assert_recorded(store: Path, outcome: RunOutcome) -> dict:
    """The store holds exactly what the runner reported, and no run of the store is left 'running'."""
    assert outcome.pending is None
    run = Store(store).get_run(outcome.run_id)
    assert run is not None
    assert run["status"] == outcome.status != "running"
    assert run["finished_at"] is not None
    cases = Store(store).case_results(outcome.run_id).to_dict("records")
    want = sorted((c["case_idx"], bool(c["passed"]), c.get("message") or "") for c in outcome.record.cases)
    assert sorted((c["case_idx"], bool(c["passed"]), c["message"] or "") for c in cases) == want
    assert Store(store).list_runs()["status"].ne("running").all()
    return run


def run(tmp_path: Path, variant: str | Path, *, cases=(0,), mode="test", timeout=90.0, **kw) -> tuple[RunOutcome, dict]:
    store = tmp_path / "runs.duckdb"
    path = variant if isinstance(variant, Path) else VARIANTS / variant
    req = RunRequest(
        path=str(path), suite="smoke", mode=mode, cases=list(cases), timeout=timeout, store=str(store), **kw
    )
    outcome = run_variant(req)
    return outcome, assert_recorded(store, outcome)


def test_contest_file_runs_unmodified_with_its_output_captured_and_a_hidden_seed(tmp_path):
    outcome, run_row = run(tmp_path, "contest_print.py", cases=(0, 8), seed=7, family="fam", note="a note")
    assert outcome.status == "passed", outcome.record.run.error
    assert [c["passed"] for c in outcome.record.cases] == [True, True]
    assert "KB-MARKER imported" in run_row["log_tail"]
    assert "KB-MARKER called (4, 16, 16)" in run_row["log_tail"]
    # the hidden seed transformed every case seed
    cases = Store(tmp_path / "runs.duckdb").case_results(outcome.run_id)
    assert cases["seed"].tolist() == [hidden_seed(SMOKE.tests[0].seed, 7), hidden_seed(SMOKE.tests[8].seed, 7)]
    assert cases["case_name"].tolist() == ["dense", "mixed"]
    assert cases["factor_res"].notna().all() and cases["orth_res"].notna().all()
    assert int(run_row["seed"]) == 7 and run_row["family"] == "fam" and run_row["note"] == "a note"
    # environment of a CPU run
    assert run_row["gpu"] == "CPU" and run_row["device"] == "cpu"
    assert run_row["torch"] and run_row["python"] and run_row["host"]
    assert run_row["warnings"] is None and pd.isna(run_row["geomean_us"])  # test mode is not timed
    source = (VARIANTS / "contest_print.py").read_text()
    bundle = Store(tmp_path / "runs.duckdb").run_bundle(outcome.run_id)
    assert bundle["source"] == source
    shown = subprocess.run(
        [sys.executable, "-m", "tracker", "show", outcome.run_id, "--store", str(tmp_path / "runs.duckdb")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0 and "\n  KB-MARKER called (4, 16, 16)" in shown.stdout, shown.stdout


def test_a_variant_that_raises_fails_with_the_exception_text(tmp_path):
    outcome, run_row = run(tmp_path, "raises.py")
    assert outcome.status == "failed"
    (case,) = outcome.record.cases
    assert not case["passed"]
    assert "RuntimeError: kb-boom: this variant fails on purpose" in case["message"]
    assert "1 case(s) failed" in run_row["error"]
    assert "Traceback" in run_row["log_tail"] and "kb-boom" in run_row["log_tail"]


@pytest.mark.parametrize(
    "variant,words",
    [("wrong_shape.py", "H has shape (4, 15, 16), expected (4, 16, 16)"), ("returns_nan.py", "non-finite")],
)
def test_a_variant_returning_garbage_fails_with_the_reason(tmp_path, variant, words):
    outcome, _ = run(tmp_path, variant)
    assert outcome.status == "failed"
    assert words in outcome.record.cases[0]["message"]


def test_the_compile_budget_ends_at_the_first_call_so_a_hang_in_warm_up_is_a_timeout(tmp_path):
    """hangs_second.py passes its first call and hangs in the second, inside the benchmark warm-up: the run's
    timeout, not the compile budget, ends it."""
    start = time.monotonic()
    outcome, run_row = run(tmp_path, "hangs_second.py", mode="benchmark", timeout=20, compile_timeout=600)
    elapsed = time.monotonic() - start
    assert outcome.status == "timeout", run_row["error"]
    assert "exceeded its timeout of 20 s" in run_row["error"]
    assert run_row["compile_s"] is not None and run_row["compile_s"] < 15
    assert elapsed < 45, elapsed  # 20 s after the first call, plus the start and the teardown
    assert wait_no_process("sleep", HANG_SLEEP) == []


def test_the_compile_budget_counts_from_the_kernels_import_not_the_workers_own_start(tmp_path):
    """The worker imports torch (1.7 s of CPU here, more under load) before it imports the kernel: a budget
    shorter than that start still fits a kernel that compiles at once (this one: 5-30 ms from its import to its
    first call's return), and the stored compile time keeps the start in it."""
    outcome, run_row = run(tmp_path, REFERENCE, compile_timeout=0.5)
    assert outcome.status == "passed", run_row["error"]
    events = {e["event"]: e["elapsed_s"] for e in outcome.events if e["event"] in ("import_start", "compiled")}
    assert events["import_start"] > 0.5 and events["compiled"] - events["import_start"] < 0.5, events
    assert run_row["compile_s"] == pytest.approx(events["compiled"], abs=0.5)


def test_each_phase_of_a_run_is_held_to_its_own_clock():
    from tracker.capture.deadlines import Deadlines

    clocks = Deadlines(compile_timeout=10, timeout=60, started=100.0, worker_start_s=30)
    assert clocks.expired(129) is None
    status, error = clocks.expired(131)
    assert status == "crashed" and "did not begin importing the kernel within 30 s" in error
    clocks.saw("import_start", 125.0)
    assert clocks.expired(134) is None  # 9 s into the budget, whatever the start took
    status, error = clocks.expired(136)
    assert status == "failed" and error.startswith("compiling took longer than 10 s") and "took 25.0 s" in error
    clocks.saw("import_start", 135.0)  # a repeated event does not restart the budget
    assert clocks.expired(136)[0] == "failed"
    clocks.saw("compiled", 130.0)
    assert clocks.expired(189) is None
    assert clocks.expired(191) == ("timeout", "the run exceeded its timeout of 60 s")
    skipped = Deadlines(compile_timeout=10, timeout=60, started=0.0)
    skipped.saw("compiled", 5.0)  # no import_start: the timeout phase still starts at the first call
    assert skipped.importing == 5.0 and skipped.expired(64) is None and skipped.expired(66)[0] == "timeout"


def test_a_hanging_variant_times_out_keeps_finished_cases_and_the_next_run_works(tmp_path):
    outcome, run_row = run(tmp_path, "hangs_second.py", cases=(0, 1), timeout=10)
    assert outcome.status == "timeout"
    assert "exceeded its timeout of 10 s" in run_row["error"]
    first, second = sorted(outcome.record.cases, key=lambda c: c["case_idx"])
    assert first["passed"] and first["spec"] == SMOKE.tests[0].spec
    assert not second["passed"] and "timeout" in second["message"] and second["spec"] == SMOKE.tests[1].spec
    # the worker and the child process it started are gone
    assert re.search(r"KB-PIDS (\d+) (\d+)", run_row["log_tail"]), run_row["log_tail"]
    assert wait_no_process("sleep", HANG_SLEEP) == []
    again, _ = run(tmp_path, REFERENCE)
    assert again.status == "passed"


def test_a_variant_that_exits_on_the_second_case_is_crashed_and_keeps_the_first(tmp_path):
    outcome, run_row = run(tmp_path, "exits_second.py", cases=(0, 2))
    assert outcome.status == "crashed"
    assert run_row["error"] == "the worker exited with code 3 before finishing"
    by_idx = {c["case_idx"]: c for c in outcome.record.cases}
    assert by_idx[0]["passed"] and by_idx[0]["factor_res"] is not None
    assert not by_idx[2]["passed"] and "exited with code 3" in by_idx[2]["message"]
    assert by_idx[2]["case_name"] == "rankdef"
    assert "KB-MARKER about to exit" in run_row["log_tail"]


def test_a_segfaulting_variant_is_crashed_with_sigsegv(tmp_path):
    outcome, run_row = run(tmp_path, "segfault.py")
    assert outcome.status == "crashed"
    assert "SIGSEGV" in run_row["error"]
    assert "SIGSEGV" in outcome.record.cases[0]["message"]


@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_a_variant_that_modifies_its_input_fails(tmp_path, mode):
    outcome, _ = run(tmp_path, "mutates.py", mode=mode)
    assert outcome.status == "failed"
    (case,) = outcome.record.cases
    assert not case["passed"]
    assert "modified its input" in case["message"]


@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_a_variant_that_modifies_its_input_after_a_correct_factorization_fails(tmp_path, mode):
    outcome, _ = run(tmp_path, "mutates_after.py", mode=mode)
    assert outcome.status == "failed"
    (case,) = outcome.record.cases
    assert not case["passed"]
    assert case["message"].startswith("custom_kernel modified its input (input 0 differs")


def test_the_word_stream_is_recorded_as_a_warning_and_the_run_still_passes(tmp_path):
    outcome, run_row = run(tmp_path, "mentions_stream.py")
    assert outcome.status == "passed"
    assert "stream" in run_row["warnings"]


@pytest.mark.parametrize(
    "variant,words",
    [
        ("import_error.py", "ModuleNotFoundError: No module named 'kb_no_such_module'"),
        ("no_kernel.py", "defines no callable custom_kernel"),
    ],
)
def test_a_variant_that_cannot_be_imported_fails_with_the_import_message(tmp_path, variant, words):
    outcome, run_row = run(tmp_path, variant)
    assert outcome.status == "failed"
    assert run_row["error"].startswith("compile failed: importing the variant failed")
    assert words in run_row["error"]
    assert outcome.record.cases == []
    if variant == "import_error.py":
        assert "kb_no_such_module" in run_row["log_tail"]


def test_bad_requests_are_refused_before_anything_starts(tmp_path):
    store = tmp_path / "never.duckdb"
    for kw, words in (
        ({"path": str(tmp_path / "missing.py")}, "no kernel file"),
        ({"path": str(VARIANTS / "raises.py"), "cases": [9]}, "case 9 is out of range"),
        ({"path": str(VARIANTS / "raises.py"), "timeout": 0}, "--timeout must be positive"),
        ({"path": str(VARIANTS / "raises.py"), "suite": "nope"}, "unknown suite"),
    ):
        with pytest.raises(ValueError, match=words):
            run_variant(RunRequest(**{"suite": "smoke", "mode": "test", "store": str(store), **kw}))
    assert not store.exists()
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------- the timing loop itself (in process, CPU clock)


def _loop_inputs():
    from tracker.workloads.qr_v2.inputs import benchmark_inputs

    xs = benchmark_inputs(SMOKE.benchmarks[0])
    return xs, [x.clone() for x in xs]


def test_timing_loop_keeps_every_sample_up_to_max_reps():
    import torch

    from tracker.capture.timing import Clock, ModeRules, run_loop

    xs, copies = _loop_inputs()
    seen = []
    rules = ModeRules(case_budget_s=1e9, max_reps=5, warmup_s=0.0, warm_every_case=False)
    clock = Clock(torch.device("cpu"))
    result = run_loop(torch.geqrf, xs, copies, clock, rules, on_rep=lambda i, t: seen.append(t), check=QR_CHECK)
    assert result.passed and len(result.samples) == 5 and seen == result.samples
    assert all(t > 0 for t in result.samples)
    assert set(result.check.residuals) == {"factor_res", "tril_res", "recon_res", "orth_res"}


def test_a_smoke_suite_caps_the_timed_repetitions_and_the_contest_suites_keep_theirs():
    from tracker.capture.timing import MODE_RULES, rules_for
    from tracker.workloads.problem_folder import ProblemFolder

    assert SMOKE.max_reps == SMOKE_MAX_REPS < MODE_RULES["benchmark"].max_reps
    assert rules_for("benchmark", SMOKE.max_reps).max_reps == SMOKE_MAX_REPS
    assert rules_for("leaderboard", SMOKE.max_reps).max_reps == SMOKE_MAX_REPS
    assert rules_for("benchmark", QR_V2.max_reps) == MODE_RULES["benchmark"]
    assert rules_for("benchmark", 10_000).max_reps == MODE_RULES["benchmark"].max_reps  # a cap never raises it
    assert rules_for("test", SMOKE.max_reps) is None
    folder = ProblemFolder(ROOT / "problems" / "vectoradd")
    assert folder.suites["smoke"].max_reps == SMOKE_MAX_REPS and folder.suites[folder.name].max_reps is None


def _loop_in_order(reply, max_reps: int, shadow_s: float = 0.0, **loop_args):
    """run_loop on the CPU with a checker whose wait for the verdict returns `reply(order so far, verdict)` and a
    shadow check that takes `shadow_s`; returns the result and the order of the sends, shadow checks and waits."""
    import time

    import torch

    from tracker.capture.timing import Clock, ModeRules, run_loop

    order = []

    def check(copies, outputs):
        order.append("sent")
        verdict = QR_CHECK(copies, outputs)

        def wait():
            order.append("waited")
            return reply(order, verdict)

        return wait

    xs, copies = _loop_inputs()
    rules = ModeRules(case_budget_s=1e9, max_reps=max_reps, warmup_s=0.0, warm_every_case=False)
    result = run_loop(
        torch.geqrf, xs, copies, Clock(torch.device("cpu")), rules, check=check,
        shadow_check=lambda c, o: order.append("shadow") or time.sleep(shadow_s), **loop_args,
    )  # fmt: skip
    return result, order


def test_timing_loop_runs_its_shadow_check_while_the_checker_judges():
    """A check may hand back the wait for its verdict: the shadow check runs between sending and waiting (so the
    worker's own check overlaps the checker's, as one check does in the harness), and a failing verdict still
    ends the loop at that repetition."""
    from tracker.workloads.base import CheckResult

    result, order = _loop_in_order(
        lambda order, verdict: verdict if len(order) < 9 else CheckResult(False, "planted failure"), max_reps=5
    )
    assert order == ["sent", "shadow", "waited"] * 3 and result.checker_last_from is None
    assert not result.passed and result.failed_rep == 2 and "planted failure" in result.message
    assert len(result.samples) == 2


def test_timing_loop_awaits_a_slower_checker_before_its_own_check():
    """Where the checker judges longer than the shadow check (a problem folder's), waiting for it after the shadow
    check leaves the checker's process the last on the GPU before the next repetition. From the first such wait
    on, the verdict is awaited first and the shadow check follows, so the timing process is last, as in the
    harness; a checker that answers at once keeps the overlap (the test above)."""
    import time

    from tracker.capture.timing import CHECKER_LAST_S

    def reply(order, verdict):
        if order.count("waited") == 2:  # the checker is slow on repetition 1
            time.sleep(CHECKER_LAST_S * 5)
        return verdict

    result, order = _loop_in_order(reply, max_reps=4)
    assert result.passed and len(result.samples) == 4 and result.checker_last_from == 1
    assert order == ["sent", "shadow", "waited"] * 2 + ["sent", "waited", "shadow"] * 2
    # the older order, kept for comparing the two against the harness (KERNELBEAM_CHECKER_ORDER=overlap)
    result, order = _loop_in_order(reply, max_reps=4, await_slow_checker=False)
    assert order == ["sent", "shadow", "waited"] * 4 and result.checker_last_from is None


def test_the_stop_rules_wall_clock_leaves_out_the_wait_for_the_checkers_verdict(monkeypatch):
    """The harness's 120 s cap counts its own wall time: timed calls and its recheck. The tracker's wait for its
    checker process is not in it, so a slow checker does not stop the loop early; a slow recheck in this process
    (the harness's own) still does."""
    import time

    from tracker.capture import timing

    # A cap of 1 s leaves the 8 timed calls and checks room on a loaded CI machine (0.25 s did not, once).
    monkeypatch.setattr(timing, "MAX_LOOP_S", 1.0)

    def loop(verdict_s: float, shadow_s: float) -> int:
        result, _ = _loop_in_order(lambda order, verdict: time.sleep(verdict_s) or verdict, 8, shadow_s)
        assert result.passed, result.message
        return len(result.samples)

    assert loop(verdict_s=0.3, shadow_s=0.0) == 8  # 2.4 s of waits, under the cap by the harness's clock
    assert loop(verdict_s=0.0, shadow_s=0.3) < 8  # the harness's own recheck counts


def test_timing_loop_releases_each_repetitions_outputs_inside_the_next_ones_calls():
    """As the harness's `outputs = [custom_kernel(d) ...]`: the untimed first pass's outputs live through
    repetition 0's calls and go after them, each repetition's through the next one's; the caller keeps none."""
    import gc
    import weakref

    import torch

    from tracker.capture.timing import Clock, ModeRules, run_loop

    xs, copies = _loop_inputs()
    first = [torch.geqrf(x) for x in xs]
    watched = [weakref.ref(first[0][0])]  # the newest outputs whose lifetime is watched
    seen = []

    def kernel(x):
        gc.collect()
        seen.append(tuple(ref() is not None for ref in watched))
        out = torch.geqrf(x)
        if x is xs[-1]:
            watched.append(weakref.ref(out[0]))
        return out

    rules = ModeRules(case_budget_s=1e9, max_reps=3, warmup_s=0.0, warm_every_case=False)
    result = run_loop(kernel, xs, copies, Clock(torch.device("cpu")), rules, check=QR_CHECK, first_outputs=first)
    gc.collect()
    assert result.passed and first == []
    calls = len(xs)
    # repetition r's calls see the outputs of the pass before alive and none older
    for r in range(3):
        for alive in seen[r * calls : (r + 1) * calls]:
            assert alive[: r + 1] == (False,) * r + (True,), (r, alive)
    assert all(ref() is None for ref in watched)


def test_the_first_pass_gives_each_call_a_fresh_clone_that_is_gone_before_the_next_call():
    """As the harness's `custom_kernel(_clone_data(data))`: one clone alive at a time, never the input itself."""
    import gc
    import weakref

    import torch

    from tracker.capture.timing import first_pass

    xs, copies = _loop_inputs()
    clones = []

    def kernel(x):
        gc.collect()
        assert all(ref() is None for ref in clones), "an earlier call's clone is still alive"
        assert all(x is not i for i in xs)
        clones.append(weakref.ref(x))
        return torch.geqrf(x)

    outs, mutation = first_pass(kernel, xs, copies, flag_mutation=True)
    assert mutation == "" and len(outs) == len(xs) == len(clones)
    assert all(torch.equal(o[0], torch.geqrf(c)[0]) for o, c in zip(outs, copies, strict=True))

    def scribbles_on_the_second(x):
        out = torch.geqrf(x)
        if len(clones) == len(xs) + 1:
            x.zero_()
        clones.append(None)
        return out

    _, mutation = first_pass(scribbles_on_the_second, xs, copies, flag_mutation=True)
    assert mutation.startswith("custom_kernel modified its input (input 1 differs")
    assert first_pass(scribbles_on_the_second, xs, copies, flag_mutation=False)[1] == ""


def test_timing_loop_stops_on_the_case_budget_after_the_minimum_time():
    import time

    import torch

    from tracker.capture.timing import Clock, ModeRules, run_loop

    def slow(x):
        time.sleep(0.01)
        return torch.geqrf(x)

    xs, copies = _loop_inputs()
    rules = ModeRules(case_budget_s=0.05, max_reps=100, warmup_s=0.0, warm_every_case=False)
    t0 = time.perf_counter()
    result = run_loop(slow, xs, copies, Clock(torch.device("cpu")), rules, check=QR_CHECK)
    assert result.passed
    assert 3 <= len(result.samples) < 10  # i > 1 and past 0.1 s, then mean x runs > budget
    assert time.perf_counter() - t0 >= 0.1
    assert min(result.samples) >= 10_000  # microseconds per call: each call sleeps 10 ms


def test_timing_loop_rechecks_every_repetition():
    import torch

    from tracker.capture.timing import Clock, ModeRules, run_loop
    from tracker.common.samplestats import stats

    calls = []

    def breaks_later(x):
        calls.append(1)
        h, tau = torch.geqrf(x)
        if len(calls) == 6:  # the first repetition (4 inputs) is right; input 1 of the second is not
            h = h.clone()
            h[0, 5, 1] += 1.0
        return h, tau

    xs, copies = _loop_inputs()
    rules = ModeRules(case_budget_s=1e9, max_reps=50, warmup_s=0.0, warm_every_case=False)
    result = run_loop(breaks_later, xs, copies, Clock(torch.device("cpu")), rules, check=QR_CHECK)
    assert not result.passed
    assert result.message.startswith("repetition 1: factor gate failed on matrix 0 of input 1")
    assert len(result.samples) == 1
    st = stats([1.0, 2.0, 3.0, 6.0])
    assert (st.runs, st.mean, st.best, st.worst) == (4, 3.0, 1.0, 6.0)
    assert st.std == pytest.approx(2.1602468995) and st.err == pytest.approx(2.1602468995 / 2)


def test_the_task_shim_provides_the_contest_names():
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location(
        "task_shim_under_test", ROOT / "tracker" / "capture" / "shim" / "task.py"
    )
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    assert task.input_t.__bound__ is torch.Tensor
    assert task.output_t.__bound__ == tuple[torch.Tensor, torch.Tensor]
    assert set(task.TestSpec.__annotations__) == {"batch", "n", "cond", "seed", "case"}
    assert task.TestSpec.__optional_keys__ >= {"case"}


def test_the_progress_shows_each_case_by_the_suites_name_and_a_pass_the_checker_gave(tmp_path):
    """The progress sinks get the runner's view of worker events: the case's name from the suite, the run's case
    count, and pass only with the checker's verdicts on that case already read (they precede the worker's word)."""
    seen: list[dict] = []
    req = RunRequest(path=str(REFERENCE), suite="smoke", mode="test", cases=[0, 1, 2], store=str(tmp_path / "s.duckdb"))
    outcome = run_variant(req, on_event=seen.append)
    assert outcome.status == "passed"
    done = [e for e in seen if e["event"] == "case_done"]
    assert [(e["case_idx"], e["spec"], e["total"], e["passed"]) for e in done] == [
        (i, SMOKE.tests[i].spec, 3, True) for i in range(3)
    ]
