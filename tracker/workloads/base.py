"""The workload interface: what the runner, the worker, the checker and the pages need to know of a problem.

A workload is suites of cases + an input generator + a checker + the work per case. qr_v2 is one
implementation (tracker.workloads.qr_v2); a GPU Mode problem folder is another (tracker.workloads.problem_folder).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tracker.common.errors import InputError
from tracker.common.vocabulary import RUN_MODES

# The contest harness flushes this much L2 before each timed repetition.
L2_FLUSH_BYTES = 256 * 1024 * 1024
# ... and times as many distinct inputs per repetition as fit this many bytes, at most MAX_INPUTS_PER_REP.
BENCHMARK_INPUT_BYTES = 256 * 1024 * 1024
MAX_INPUTS_PER_REP = 50
# A smoke suite checks that a kernel runs and passes, in seconds on a CPU; its timings are no measurement (a CPU
# clock's noise never meets the stop rule, so every case ran all 200 repetitions, each rechecked: 6 s a run, not 3).
SMOKE_MAX_REPS = 20
BENCHMARK_SEED_STEP = 42  # input i of a repetition (from 1) is generated with seed + 42 * i


def inputs_per_rep(input_bytes: int) -> int:
    """How many distinct inputs of this size one timed repetition loops over, as the contest's harness sizes it."""
    return max(1, min(MAX_INPUTS_PER_REP, BENCHMARK_INPUT_BYTES // input_bytes)) if input_bytes > 0 else 1


def tensor_bytes(data: Any) -> int:
    """The bytes of the tensors in an input (tensors in tuples, lists and dicts; anything else counts 0)."""
    if hasattr(data, "element_size") and hasattr(data, "numel"):
        return int(data.numel()) * int(data.element_size())
    if isinstance(data, (tuple, list)):
        return sum(tensor_bytes(x) for x in data)
    if isinstance(data, dict):
        return sum(tensor_bytes(x) for x in data.values())
    return 0


@dataclass
class CheckResult:
    passed: bool
    message: str = ""
    residuals: dict[str, float] = field(default_factory=dict)
    # Where a failure is: the input (of several) and the matrix of its batch; None when nothing is to blame or the
    # workload cannot say (a problem folder's checker). Failure evidence is kept for that matrix.
    input_idx: int | None = None
    matrix_idx: int | None = None
    worst_residuals: dict[str, float] = field(default_factory=dict)  # the scaled residuals of that matrix


@runtime_checkable
class Case(Protocol):
    """One case of a suite. `spec` names it with its seed; `label` without (what history keys on)."""

    seed: int | None

    @property
    def spec(self) -> str: ...

    @property
    def label(self) -> str: ...

    def input_count(self) -> int: ...

    def with_seed(self, seed: int) -> Case: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class SuiteLike(Protocol):
    name: str
    tests: tuple[Any, ...]
    benchmarks: tuple[Any, ...]
    max_reps: int | None  # a cap on the timed mode's repetitions per case (SMOKE_MAX_REPS), None for the mode's own


@runtime_checkable
class Workload(Protocol):
    """A problem to optimise a kernel for. Generation and checking run in the worker only."""

    name: str
    # Whether a kernel that changes its input fails (qr_v2's gate); GPU Mode's harness hands the kernel a clone.
    flags_mutation: bool

    @property
    def suites(self) -> dict[str, SuiteLike]: ...

    @property
    def sha256(self) -> str:
        """Hash of the files that define the problem: runs of different definitions never mix."""
        ...

    def default_suite(self, gpu: bool) -> str: ...

    def hidden_seed(self, case: Any, run_seed: int) -> Any: ...

    def generate(self, case: Any, seed: int | None = None, device: Any = "cpu") -> Any: ...

    def benchmark_inputs(self, case: Any, device: Any = "cpu") -> list[Any]: ...

    def check(self, data: Any, output: Any) -> CheckResult: ...

    def check_outputs(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> CheckResult: ...

    def harness_recheck(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """What the contest's harness runs in its timing process after each repetition (each output checked
        on its own, by the contest's checker), done for what it leaves in that process; the verdict is unused."""
        ...

    def work(self, case: Any) -> tuple[float | None, float | None]:
        """(FLOPs, bytes) of one kernel call on the case, for rate columns; None where unknown."""
        ...

    def case_columns(self, case: Any) -> dict[str, Any]:
        """The case_results columns that describe a case (qr_v2: batch, n, cond, seed, case_name; else args)."""
        ...


def get_suite(workload: Workload, name: str) -> SuiteLike:
    try:
        return workload.suites[name]
    except KeyError:
        raise InputError(
            f"unknown suite {name!r} for workload {workload.name}; choose from {', '.join(workload.suites)}"
        ) from None


def cases_for(suite: SuiteLike, mode: str) -> tuple[Any, ...]:
    """Test mode checks the tests; benchmark and leaderboard modes time the benchmarks."""
    if mode not in RUN_MODES:
        raise InputError(f"unknown mode {mode!r}; choose from {', '.join(RUN_MODES)}")
    return suite.tests if mode == "test" else suite.benchmarks


def no_geomean(mode: str, status: str, cases: int, suite_cases: int | None, all_timed: bool) -> str | None:
    """Why a run has no geomean, or None when it has one. Like the contest's score: only a passed timed run of
    the whole suite (every case timed) has one; a subset (--cases) would not be comparable with full runs."""
    if mode == "test":
        return "a test run is not timed"
    if status != "passed":
        return f"only a passed run of the whole suite has one (this one: {status})"
    if suite_cases is not None and cases != suite_cases:
        return f"a partial run ({cases} of the suite's {suite_cases} cases), and the geomean needs every one"
    if not all_timed:
        return "a case has no timing"
    return None


def files_sha256(paths: Sequence[Path]) -> str:
    """One hash over several files, each with its name, so renaming or moving content between them counts."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def combine_seed(case_seed: int, run_seed: int) -> int:
    """The contest's hidden-seed transform (a Cantor pairing): a large secret seed gives a large case seed."""
    a, s = case_seed, run_seed
    return a + (a + s) * (a + s + 1) // 2


# (FLOP/s, bytes/s) no device of the kind exceeds: GPUs' dense low-precision peaks and memory bandwidth are
# below 5 PFLOP/s and 20 TB/s; CPUs' FP32 vector peaks (two sockets of wide cores) and DRAM below these.
PEAKS = {"cuda": (5e15, 2e13), "cpu": (2e13, 1e12)}


def floor_us(flops: float | None, nbytes: float | None, device: str) -> float:
    """The least time one call can take on any device of this kind for this much work, in microseconds."""
    peak_flops, peak_bytes = PEAKS["cuda" if device == "cuda" else "cpu"]
    return max((flops or 0.0) / peak_flops, (nbytes or 0.0) / peak_bytes) * 1e6
