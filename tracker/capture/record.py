"""What a run records: the request (RunRequest) and how the worker's events and its ending become the run's record
(complete_record). Used by the runner, and by a worker whose runner went away to save what it finished."""

from __future__ import annotations

import json
import math
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker import store as store_mod
from tracker.common.errors import InputError
from tracker.common.jsonfields import parse_flags
from tracker.common.vocabulary import CASE_STATS, CHECKER_RAISED, DEFAULT_WORKLOAD, RUN_MODES
from tracker.store.validate import row_problem
from tracker.workloads import cases_for, get_suite, get_workload, no_geomean
from tracker.workloads.base import BENCHMARK_SEED_STEP, MAX_INPUTS_PER_REP, combine_seed

DEFAULT_TIMEOUT_S = 900.0
DEFAULT_COMPILE_TIMEOUT_S = 900.0  # import and first calls: Triton JIT, load_inline builds
DEFAULT_ROUNDS = 4  # rounds of an interleaved session (ab, fidelity, the Benchmark page's A/B jobs)
INCONCLUSIVE = ("timeout", "crashed", "cancelled")

# What a failed build looks like from the first call: load_inline's RuntimeError, Triton's CompilationError, ninja.
_COMPILE_ERROR = re.compile(
    r"custom_kernel raised (\w*Compil\w*Error|RuntimeError: Error building extension|CalledProcessError)"
)


@dataclass
class RunRequest:
    path: str
    suite: str = DEFAULT_WORKLOAD  # its full suite has its name
    mode: str = "benchmark"
    cases: list[int] | None = None
    seed: int | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    compile_timeout: float = DEFAULT_COMPILE_TIMEOUT_S
    family: str | None = None
    parent: str | None = None
    note: str | None = None
    profile: bool = False
    ncu: bool = False  # also profile one call per case with Nsight Compute, after the timed run (ncu_pass)
    store: str = store_mod.DEFAULT_STORE
    trigger: str = "cli"
    device: str = "auto"
    problem: str | None = None  # a GPU Mode problem folder; None: qr_v2

    def workload(self):
        return get_workload(self.problem)

    def suite_cases(self) -> tuple:
        return cases_for(get_suite(self.workload(), self.suite), self.mode)

    name: str | None = None  # the variant's name; default from the path (tracker.variants.naming)
    recorded_path: str | None = None  # a registered snapshot run from a temp copy: the path and commit it has
    commit: str | None = None
    gpu_present: bool | None = None  # None: probe (only when a variant needs CUDA)
    sandbox: bool = True  # False (--no-sandbox): the worker runs without bubblewrap, and the run says so
    compile_cache: bool = True  # False (--fresh-compile): compile from nothing, not from this source's cache
    method: str = "tracker"  # or "contest": the problem folder's own eval.py times and judges (contest_method)
    pair_id: str | None = None  # a run of an interleaved A/B session (`tracker ab`): its id, side and round
    pair_side: str | None = None
    pair_round: int | None = None

    def validate(self) -> None:
        """Raise ValueError with a clear message for any bad argument, before anything is started."""
        if self.mode not in RUN_MODES:
            raise InputError(f"unknown mode {self.mode!r}; choose from {', '.join(RUN_MODES)}")
        for label, value in (("family", self.family), ("parent", self.parent), ("note", self.note)):
            if value is not None and "\x00" in str(value):
                raise InputError(f"the {label} contains a NUL character")
        path = Path(self.path)
        if not path.is_file():
            raise InputError(f"no kernel file at {self.path}")
        if path.suffix != ".py":
            raise InputError(f"{self.path} is not a Python file")
        # Its text is recorded as the variant's source: a link named .py to another file (a kernel can plant one in
        # its compile cache, which outlives its run) would copy that file into the store.
        if path.resolve().suffix != ".py" or store_mod.is_side_key(path):
            raise InputError(f"{self.path} is a link to {path.resolve()}, not to a Python file")
        cases = self.suite_cases()
        for i in self.cases or []:
            if not 0 <= i < len(cases):
                raise InputError(f"case {i} is out of range: suite {self.suite} has {len(cases)} {self.mode} cases")
        if self.seed is not None:
            # Input generators seed torch with the transformed case seed (plus a small offset per input), which
            # must fit a signed 64-bit integer; the contest's transform grows with the square of the seed.
            for case in cases:
                top = combine_seed(case.seed or 0, self.seed) + BENCHMARK_SEED_STEP * (MAX_INPUTS_PER_REP + 1)
                if not -(2**63) <= top < 2**63:
                    raise InputError(
                        f"--seed {self.seed} is out of range: the contest's seed transform takes case seeds past "
                        "64 bits (use a seed below about 4 billion in magnitude)"
                    )
        if self.cases is not None and len(set(self.cases)) != len(self.cases):
            raise InputError(f"--cases names a case more than once: {self.cases}")
        if not Path(self.store).resolve().parent.is_dir():
            raise InputError(f"cannot create store {self.store}: its folder does not exist")
        for name, value in (("--timeout", self.timeout), ("--compile-timeout", self.compile_timeout)):
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise InputError(f"{name} must be positive and finite (seconds), not {value}")
        if self.method not in store_mod.RUN_METHODS:
            raise InputError(f"--method must be one of {', '.join(store_mod.RUN_METHODS)}")
        if self.method == "contest" and (self.problem is None or self.profile or self.ncu):
            raise InputError(
                "--method contest needs --problem DIR (its eval.py and task.yml `files:`) and no --profile or --ncu"
            )
        problem = device_problem(self.device, self.gpu_present)
        if problem:
            raise InputError(problem)


def device_problem(device: str, gpu_present: bool | None = None) -> str | None:
    """What is wrong with --device here, or None. `gpu_present` as the caller found it (a cluster's workers have
    the GPUs, not this machine); None: probed here, only for --device cuda."""
    if device not in ("auto", "cpu", "cuda"):
        return "--device must be auto, cpu or cuda"
    if device == "cuda":
        if gpu_present is None:
            from tracker.capture.envinfo import gpu_available

            gpu_present = gpu_available()
        if not gpu_present:
            return "--device cuda: no CUDA GPU is usable here (use --device auto or cpu)"
    return None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"the worker was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"the worker was killed by signal {-code}"
    return f"the worker exited with code {code} before finishing"


def case_row(event: dict[str, Any]) -> dict[str, Any]:
    case = event["case"]
    row = {k: event.get(k) for k in store_mod.TABLE_COLUMNS["case_results"] if k in event}
    row.update(inputs=case.get("inputs"), case_idx=event["case_idx"], spec=event["spec"])
    row.update(event.get("columns") or {})  # the workload's description of the case (qr_v2: batch, n, ...)
    return row


def _profile_rows(event: dict[str, Any], run_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """A profile event's rows (profile_cases, profile_kernels) without the run id, or (None, []) where any of them
    does not fit its table: the worker wrote them, and a malformed one must not cost the run its record."""
    case = {k: event.get(k) for k in ("case_idx", "launches", "host_us", "device_us", "trace_path")}
    kernels = event.get("kernels")
    if not isinstance(kernels, list) or not all(isinstance(k, dict) for k in kernels):
        return None, []
    columns = store_mod.TABLE_COLUMNS["profile_kernels"]
    kernels = [{**{c: k.get(c) for c in columns if c != "run_id"}, "case_idx": case["case_idx"]} for k in kernels]
    tables = [("profile_cases", case)] + [("profile_kernels", k) for k in kernels]
    if any(row_problem(table, {**row, "run_id": run_id}) for table, row in tables):
        return None, []
    return case, kernels


def complete_record(record, req, events, status, error, returncode, log_tail) -> None:
    """Fill the record from the worker's events and how it ended."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_kind.setdefault(event["event"], []).append(event)
    for env in by_kind.get("env", [])[:1]:
        record.run.update({k: v for k, v in env.items() if k in store_mod.TABLE_COLUMNS["runs"]})
    kind = "test" if req.mode == "test" else "benchmark"
    for event in by_kind.get("case_done", []):
        record.cases.append({**case_row(event), "kind": kind})
        record.samples.extend((event["case_idx"], rep, t) for rep, t in enumerate(event.get("samples") or []))
    dropped = 0
    for event in by_kind.get("profile", []):
        case, kernels = _profile_rows(event, record.run.run_id)
        if case is None:
            dropped += 1
            continue
        record.profile_cases.append(case)
        record.profile_kernels.extend(kernels)
    if dropped:
        note = f"{dropped} profile(s) the worker sent did not fit the store and were not kept"
        record.run.warn(note)

    timed_all = bool(by_kind.get("timing_done"))
    if timed_all and not by_kind.get("done"):
        # Every case was checked and timed; only the optional profile did not finish. That keeps the verdict.
        reason = error or exit_text(returncode)
        record.run.warn(f"profile unfinished: {reason}")
        status = error = None
    done = {e["case_idx"] for e in by_kind.get("case_done", [])}
    unfinished = [e for e in by_kind.get("case_start", []) if e["case_idx"] not in done]
    if status is None:
        if by_kind.get("error"):
            status, error = "failed", by_kind["error"][0]["message"]
        elif timed_all:
            failed = [c["spec"] for c in record.cases if not c["passed"]]
            status = "failed" if failed or not record.cases else "passed"
            error = f"{len(failed)} case(s) failed: {', '.join(failed)}" if failed else None
            unjudged = [
                c.get("message") for c in record.cases if not c["passed"] and CHECKER_RAISED in (c.get("message") or "")
            ]
            if unjudged:  # not the kernel's answer: the checker could not judge it
                error += f"; {len(unjudged)} of them not judged, {unjudged[0][:300]}"
            first = (record.cases[0].get("message") or "") if record.cases else ""
            if failed and _COMPILE_ERROR.search(first):  # the first call failed to build: not the kernel's result
                error = f"compile failed: {first[:600]}; {error}"
        else:
            status, error = "crashed", exit_text(returncode)
    for event in unfinished:  # the case the worker was in when it hung, crashed or was stopped
        columns = _case_columns(req, event["case_idx"])
        row = case_row({**event, "case": {}, "columns": columns, "passed": False, "message": error})
        record.cases.append({**row, "kind": kind})
    means = [c.get("mean_us") for c in record.cases]
    all_timed = no_geomean(req.mode, status, len(means), len(req.suite_cases()), all(means)) is None
    record.run.update(
        status=status,
        error=error,
        log_tail=log_tail,
        finished_at=store_mod.now(),
        geomean_us=_geomean(means) if all_timed else None,
    )


def _case_columns(req: RunRequest, case_idx: int) -> dict[str, Any]:
    workload = req.workload()
    case = req.suite_cases()[case_idx]
    return workload.case_columns(workload.hidden_seed(case, req.seed) if req.seed is not None else case)


def time_split(events: list[dict[str, Any]]) -> dict[str, float] | None:
    """Where the finished cases' wall time went, by the runner's clock (each case from its start to its done
    event): the timed repetitions themselves (samples x inputs), the checker judging their outputs, the timing
    process's own recheck of them (the contest harness's, on a GPU; the worker's word, shown only here), and the
    rest (warm-up, the first pass, handing outputs over). The checker judges while the recheck runs, so only the
    longer of the two is taken from the rest. None without a finished case."""
    starts = {e.get("case_idx"): e.get("elapsed_s") for e in events if e.get("event") == "case_start"}
    wall = timed = checking = recheck = 0.0
    for e in events:
        start = starts.get(e.get("case_idx"))
        if e.get("event") != "case_done" or not isinstance(start, float) or not isinstance(e.get("elapsed_s"), float):
            continue
        wall += e["elapsed_s"] - start
        timed += sum(e.get("samples") or []) * int((e.get("case") or {}).get("inputs") or 1) / 1e6
        checking += float(e.get("check_s") or 0.0)
        said = e.get("recheck_s")
        if isinstance(said, int | float) and 0 <= said < e["elapsed_s"] - start:
            recheck += float(said)
    if wall <= 0:
        return None
    rest = max(wall - timed - max(checking, recheck), 0.0)
    return {"cases_s": wall, "timed_s": timed, "checking_s": checking, "recheck_s": recheck, "rest_s": rest}


def run_summary(outcome) -> dict[str, Any]:
    """The JSON document of a finished run (`run --json` prints it, a dashboard job writes it)."""
    run = outcome.record.run
    return {
        "run_id": run.run_id,
        "status": run.status,
        "suite": run.suite,
        "problem": run.problem,
        "mode": run.mode,
        "gpu": run.gpu,
        "geomean_us": run.geomean_us,
        "error": run.error,
        "warnings": run.warnings,
        "flags": parse_flags(run.flags)[0],
        "compile_s": run.compile_s,
        "time": time_split(getattr(outcome, "events", None) or []),
        "shared_device": run.shared_device,
        "side_file": str(outcome.pending.path) if outcome.pending else None,
        # Outside the store's side folder nothing brings the run in by itself: the whole record goes along.
        "record": json.loads(outcome.record.to_json()) if outcome.pending and outcome.pending.fallback else None,
        "unreadable_side_files": [{"path": str(p), "why": why} for p, why in outcome.flushed.unreadable],
        "cases": [
            {
                "case_idx": c["case_idx"],
                "spec": c["spec"],
                "passed": c["passed"],
                "message": c.get("message") or "",
                **{k: c.get(k) for k in CASE_STATS},
            }
            for c in outcome.record.cases
        ],
    }


def queue_status(statuses: list[str]) -> str:
    """One status for the whole queue: passed only if every run passed, else the first other one."""
    return next((s for s in statuses if s != "passed"), "passed")
