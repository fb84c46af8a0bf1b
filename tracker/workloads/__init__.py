"""Workloads: the problems a kernel is tracked on. qr_v2 is built in; any GPU Mode problem folder is another.

`get_workload(None)` is qr_v2; `get_workload(DIR)` loads a problem folder (task.yml, reference.py, task.py).
"""

from __future__ import annotations

from pathlib import Path

from tracker.common.errors import InputError
from tracker.common.vocabulary import DEFAULT_WORKLOAD as DEFAULT
from tracker.workloads.base import Workload, cases_for, get_suite, no_geomean

__all__ = [
    "DEFAULT", "Workload", "cases_for", "for_suite", "gate_tolerances", "get_suite", "get_workload", "no_geomean",
    "suite_size",
]  # fmt: skip


def get_workload(name: str | Path | None = None) -> Workload:
    """The workload named (qr_v2, the default) or the GPU Mode problem folder at that path."""
    if name is None or str(name) == DEFAULT:
        from tracker.workloads.qr_v2.workload import QrV2Workload

        return QrV2Workload()
    from tracker.workloads.problem_folder import ProblemFolder

    return ProblemFolder(name)


def gate_tolerances(problem: str | None) -> dict[str, float]:
    """Scaled-residual column -> tolerance of each numeric gate of a problem (a problem folder has none we know)."""
    if problem is None or problem == DEFAULT:
        from tracker.workloads.qr_v2.gates import GATES

        return dict(GATES)
    return {}


def for_suite(suite_name: str, problem: str | Path | None = None) -> tuple[Workload, object]:
    """The workload and its suite of that name; ValueError naming the choices when it has none."""
    workload = get_workload(problem)
    return workload, get_suite(workload, suite_name)


def suite_size(problem: str | None, suite: str, mode: str) -> int | None:
    """How many cases a run of this suite and mode has when it runs them all; None where it is not known here (a
    problem folder's runs record its name, not the folder)."""
    if problem is not None and problem != DEFAULT:
        return None
    try:
        return len(cases_for(get_suite(get_workload(None), suite), mode))
    except InputError:
        return None
