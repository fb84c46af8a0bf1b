"""qr_v2 as a workload: its suites, the contest's input recipe and gates, and the FLOP count of a QR."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tracker.workloads.base import CheckResult, files_sha256
from tracker.workloads.qr_v2.suites import QR_V2, SUITES, Case, Suite, hidden_seed

_SOURCES = ("suites.py", "inputs.py", "checks.py")


def flops_per_matrix(n: float) -> float:
    """Flops of a Householder QR of one n x n matrix: 4/3 n^3 + 2 n^2 + 14 n / 3."""
    return 4.0 / 3.0 * n**3 + 2.0 * n**2 + 14.0 * n / 3.0


class QrV2Workload:
    name = "qr_v2"
    flags_mutation = True

    @property
    def suites(self) -> dict[str, Suite]:
        return SUITES

    @property
    def sha256(self) -> str:
        here = Path(__file__).resolve().parent
        return files_sha256([here / name for name in _SOURCES])

    def default_suite(self, gpu: bool) -> str:
        return QR_V2.name if gpu else "smoke"

    def hidden_seed(self, case: Case, run_seed: int) -> Case:
        return case.with_seed(hidden_seed(case.seed, run_seed))

    def generate(self, case: Case, seed: int | None = None, device: Any = "cpu") -> Any:
        from tracker.workloads.qr_v2.inputs import generate

        return generate(case, seed, device)

    def benchmark_inputs(self, case: Case, device: Any = "cpu") -> list[Any]:
        from tracker.workloads.qr_v2.inputs import benchmark_inputs

        return benchmark_inputs(case, device)

    def check(self, data: Any, output: Any) -> CheckResult:
        from tracker.workloads.qr_v2.checks import check_qr

        return check_qr(data, output)

    def check_outputs(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> CheckResult:
        from tracker.workloads.qr_v2.checks import check_outputs

        return check_outputs(list(inputs), list(outputs))

    def harness_recheck(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        from tracker.workloads.qr_v2.checks import check_qr

        for data, output in zip(inputs, outputs, strict=True):  # the spec's float32 product, one output at a time,
            if not check_qr(data, output, blocked=False, one_pass=True).passed:  # each batch at once, as the harness
                return  # the harness stops at the first failure

    def work(self, case: Case) -> tuple[float | None, float | None]:
        flops = case.batch * flops_per_matrix(case.n)
        nbytes = 4.0 * case.batch * (2 * case.n * case.n + case.n)  # read A; write H and tau (float32)
        return flops, nbytes

    def case_columns(self, case: Case) -> dict[str, Any]:
        return {
            "batch": case.batch,
            "n": case.n,
            "cond": case.cond,
            "seed": case.seed,
            "case_name": case.case,
            "label": case.label,
            "args": json.dumps({k: v for k, v in case.to_dict().items() if k != "inputs"}),
        }
