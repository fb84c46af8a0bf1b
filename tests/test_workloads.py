"""The workload interface: qr_v2 through it gives the same inputs, verdicts and work as its own modules."""

from __future__ import annotations

import pytest
import torch

from pages.ui.tables import flops_per_matrix
from tracker.workloads import for_suite, get_workload
from tracker.workloads.base import Workload, combine_seed
from tracker.workloads.qr_v2.checks import check_qr
from tracker.workloads.qr_v2.inputs import benchmark_inputs, generate
from tracker.workloads.qr_v2.suites import SMOKE, hidden_seed


def test_qr_v2_and_problem_folders_implement_the_interface(tmp_path):
    (tmp_path / "task.yml").write_text("tests:\n  - {n: 4, seed: 1}\n")
    (tmp_path / "reference.py").write_text("")
    for workload in (get_workload(), get_workload("qr_v2"), get_workload(tmp_path)):
        assert isinstance(workload, Workload)
    assert get_workload(tmp_path).name == tmp_path.name


def test_qr_v2_through_the_interface_keeps_its_figures():
    workload, suite = for_suite("smoke")
    assert workload.name == "qr_v2" and suite is SMOKE
    case = SMOKE.tests[8]  # mixed
    assert torch.equal(workload.generate(case), generate(case))
    bench = SMOKE.benchmarks[2]
    assert all(
        torch.equal(a, b) for a, b in zip(workload.benchmark_inputs(bench), benchmark_inputs(bench), strict=True)
    )
    a = generate(case)
    h, tau = torch.geqrf(a)
    assert workload.check(a, (h, tau)) == check_qr(a, (h, tau))
    bad = workload.check(a, (h, tau * 2))
    assert not bad.passed and bad.residuals == check_qr(a, (h, tau * 2)).residuals
    flops, nbytes = workload.work(case)
    assert flops == pytest.approx(case.batch * flops_per_matrix(case.n))
    assert nbytes == 4 * case.batch * (2 * case.n * case.n + case.n)
    assert workload.hidden_seed(case, 99).seed == hidden_seed(case.seed, 99) == combine_seed(case.seed, 99)
    cols = workload.case_columns(case)
    assert (cols["batch"], cols["n"], cols["case_name"], cols["label"]) == (12, 32, "mixed", "12x32 c2 mixed")


def test_unknown_suite_names_the_workloads_suites():
    with pytest.raises(ValueError, match="unknown suite 'big' for workload qr_v2; choose from qr_v2, smoke"):
        for_suite("big")
