"""The words every layer shares, each defined once: the default workload and store, the statuses and methods of
a run, the statistics of a timed case."""

from __future__ import annotations

DEFAULT_WORKLOAD = "qr_v2"  # the built-in problem: runs.problem of records that name none
DEFAULT_STORE = "experiments.duckdb"
STORE_ENV = "KERNELBEAM_STORE"  # the store the CLI and the dashboard use unless told another
# `skipped`: the variant cannot run on this machine (it needs CUDA or a compiler); never a regression.
RUN_STATUSES = ("running", "passed", "failed", "timeout", "crashed", "cancelled", "skipped")
FINISHED_STATUSES = tuple(s for s in RUN_STATUSES if s != "running")  # what an export holds: `running` rows stay
# test checks the suite's test cases; benchmark and leaderboard time its benchmarks (a geomean), the latter longer.
RUN_MODES = ("test", "benchmark", "leaderboard")
TIMED_MODES = RUN_MODES[1:]
RUN_METHODS = ("tracker", "contest")  # runs.method; NULL is the tracker's own (runs recorded before methods)
# The statistics of a timed case over its samples, as case_results stores them (tracker.common.samplestats).
CASE_STATS = ("runs", "mean_us", "std_us", "err_us", "best_us", "worst_us", "median_us")
# How a case's message begins when the checker itself failed on an output (out of GPU memory, say), so the run's error
# can say the kernel's answer was not judged.
CHECKER_RAISED = "the checker raised"
# What the CLI and the Run page say of a profile report whose file is not here (an import may come without a report
# too large to move; the shipped samples/ leave Nsight Compute reports out).
REPORT_NOT_HERE = "not beside this store"
# Compare (page and CLI) after the sides that ran beside other work ("A", "B" or "A and B")
SHARED_DEVICE_NOTE = (
    "ran on a shared device (other GPU processes or host load above its cores): differences may be contention, not "
    "the code"
)
