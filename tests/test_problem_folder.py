"""GPU Mode problem folders as workloads: `python -m tracker run FILE --problem DIR` judges a kernel by the
folder's own generator, checker and case lists. The folders are written here: a vector add whose checker returns
(passed, message) (newer GPU Mode problems) and a row softmax whose checker returns an error string (older ones)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import open_page
from tracker.common.errors import InputError
from tracker.workloads import get_workload
from tracker.workloads.problem_folder import ArgsCase, ProblemFolder, _verdict

# The module's five tracker runs (the `runs` fixture: about 15 s alone, 60-100 s in the loaded suite) are made
# once, on one xdist worker (`--dist loadgroup`), not once per worker.
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("problem_folder_runs")]
ROOT = Path(__file__).resolve().parent.parent

VECADD = {
    "task.yml": """
tests:
  - {size: 16, seed: 11}
  - {size: 257, seed: 12}
benchmarks:
  - {size: 4096, seed: 13}
""",
    "task.py": """
import torch

input_t = tuple[torch.Tensor, torch.Tensor]
output_t = torch.Tensor
PROBLEM_MARK = "vector add"  # only this folder's task.py has it: a kernel importing it proves which task it got
""",
    "reference.py": """
import torch
from task import input_t, output_t


def generate_input(size: int, seed: int) -> input_t:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=gen), torch.randn(size, generator=gen)


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    return a + b


def check_implementation(data: input_t, output: output_t):
    expected = ref_kernel(data)
    if not isinstance(output, torch.Tensor) or output.shape != expected.shape:
        return False, "vecadd: the output has the wrong shape"
    err = (output - expected).abs().max().item()
    return (True, "") if err <= 1e-6 else (False, f"vecadd: mismatch, max abs error {err:.3g}")
""",
}
VECADD_OK = """
from task import PROBLEM_MARK, input_t, output_t

assert PROBLEM_MARK == "vector add"


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return a + b
"""
VECADD_WRONG = """
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    return a - b
"""
SOFTMAX = {
    "task.yml": """
name: row_softmax
tests:
  - {rows: 3, cols: 8, seed: 101}
  - {rows: 5, cols: 33, seed: 102}
benchmarks:
  - {rows: 64, cols: 128, seed: 103}
""",
    "task.py": """
import torch

input_t = torch.Tensor
output_t = torch.Tensor
""",
    "utils.py": """
def max_abs_diff(x, y) -> float:
    return (x - y).abs().max().item()
""",
    "reference.py": """
import torch
from task import input_t, output_t
from utils import max_abs_diff


def generate_input(rows: int, cols: int, seed: int) -> input_t:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=gen) * 3


def ref_kernel(data: input_t) -> output_t:
    return torch.softmax(data, dim=-1)


def check_implementation(data: input_t, output: output_t) -> str:
    if output.shape != data.shape:
        return f"softmax: shape {tuple(output.shape)}, expected {tuple(data.shape)}"
    diff = max_abs_diff(output, ref_kernel(data))
    return f"softmax: rows differ from the reference by {diff:.3g}" if diff > 1e-5 else ""
""",
}
SOFTMAX_IN_PLACE = """
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    data.sub_(data.amax(dim=-1, keepdim=True)).exp_()  # overwrites its input, as GPU Mode allows
    return data.div_(data.sum(dim=-1, keepdim=True))
"""
SOFTMAX_WRONG = """
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return torch.softmax(data, dim=0)  # normalises columns, not rows
"""


def write_folder(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text.lstrip())
    return folder


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def run_json(store: Path, kernel: Path, problem: Path, *args: str) -> dict:
    proc = cli("run", str(kernel), "--problem", str(problem), "--device", "cpu", "--store", str(store), "--json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("problems")
    vecadd = write_folder(tmp / "problems" / "vecadd", VECADD)
    softmax = write_folder(tmp / "problems" / "softmax", SOFTMAX)
    kernels = tmp / "kernels"
    kernels.mkdir()
    for name, text in [("vadd_ok", VECADD_OK), ("vadd_wrong", VECADD_WRONG)]:
        (kernels / f"{name}.py").write_text(text)
    (kernels / "sm_wrong.py").write_text(SOFTMAX_WRONG)
    (kernels / "sm_in_place.py").write_text(SOFTMAX_IN_PLACE)
    store = tmp / "runs.duckdb"
    out = {"store": store, "vecadd": vecadd, "softmax": softmax, "kernels": kernels}
    out["vadd_test"] = run_json(store, kernels / "vadd_ok.py", vecadd, "--mode", "test", "--suite", "vecadd")
    out["vadd_bench"] = run_json(store, kernels / "vadd_ok.py", vecadd, "--suite", "vecadd")
    out["vadd_wrong"] = run_json(store, kernels / "vadd_wrong.py", vecadd, "--suite", "vecadd")
    out["sm_wrong"] = run_json(store, kernels / "sm_wrong.py", softmax, "--mode", "test", "--seed", "777")
    # the softmax folder's passing benchmark run is the in-place kernel's (one run fewer: the suite's CPU time)
    out["sm_in_place"] = run_json(store, kernels / "sm_in_place.py", softmax, "--suite", "row_softmax")
    return out


def rows(store: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def test_a_correct_vector_add_passes_the_folders_tests_and_benchmarks(runs):
    test, bench = runs["vadd_test"], runs["vadd_bench"]
    assert test["status"] == "passed", test
    assert [c["spec"] for c in test["cases"]] == ["size=16 seed=11", "size=257 seed=12"]
    assert bench["status"] == "passed", bench
    assert [c["spec"] for c in bench["cases"]] == ["size=4096 seed=13"]
    case = bench["cases"][0]
    assert case["runs"] >= 3 and case["mean_us"] > 0 and bench["geomean_us"] == pytest.approx(case["mean_us"])
    # the samples are stored as for qr_v2, one row per timed repetition
    (count,) = rows(runs["store"], "SELECT count(*) FROM samples WHERE run_id = ?", [bench["run_id"]])[0]
    assert count == case["runs"]


def test_a_wrong_kernel_fails_with_the_folders_own_checker_message(runs):
    wrong = runs["vadd_wrong"]
    assert wrong["status"] == "failed"
    assert wrong["cases"][0]["message"].startswith("input 0: vecadd: mismatch, max abs error")
    # the older convention: check_implementation returns an error string
    sm = runs["sm_wrong"]
    assert sm["status"] == "failed"
    assert all(c["message"].startswith("softmax: rows differ from the reference by") for c in sm["cases"])


def test_a_kernel_may_write_into_its_input_as_gpu_mode_allows(runs):
    # the input is checked from an untouched copy and restored after each timed repetition
    run = runs["sm_in_place"]
    assert run["status"] == "passed", run
    assert run["cases"][0]["runs"] >= 3


def test_the_smoke_suite_is_the_first_test_and_a_hidden_seed_transforms_it(runs):
    sm = runs["sm_wrong"]  # no --suite on a CPU: smoke
    assert sm["suite"] == "smoke" and len(sm["cases"]) == 1
    a, s = 101, 777
    assert sm["cases"][0]["spec"] == f"rows=3 cols=8 seed={a + (a + s) * (a + s + 1) // 2}"


def test_runs_record_the_problem_name_hash_and_case_arguments(runs):
    store = runs["store"]
    got = dict(rows(store, "SELECT run_id, problem FROM runs"))
    assert got[runs["vadd_test"]["run_id"]] == "vecadd"  # the folder's name
    assert got[runs["sm_in_place"]["run_id"]] == "row_softmax"  # task.yml's name:
    hashes = dict(rows(store, "SELECT problem, any_value(problem_sha256) FROM runs GROUP BY problem"))
    assert hashes["vecadd"] == ProblemFolder(runs["vecadd"]).sha256
    assert len({*hashes.values(), get_workload().sha256}) == 3
    args, label, seed, batch = rows(
        store, "SELECT args, label, seed, batch FROM case_results WHERE run_id = ?", [runs["vadd_bench"]["run_id"]]
    )[0]
    assert json.loads(args) == {"size": 4096, "seed": 13} and label == "size=4096" and seed == 13 and batch is None


def test_the_problem_hash_covers_every_file_of_the_folder(tmp_path):
    folder = write_folder(tmp_path / "sm", SOFTMAX)
    before = ProblemFolder(folder).sha256
    (folder / "utils.py").write_text(SOFTMAX["utils.py"] + "\n# changed\n")
    assert ProblemFolder(folder).sha256 != before


def test_compare_across_problems_refuses_and_histories_keep_problems_apart(runs):
    a, b = runs["vadd_bench"]["run_id"], runs["sm_in_place"]["run_id"]
    assert runs["sm_in_place"]["status"] == "passed", runs["sm_in_place"]
    proc = cli("compare", a, b, "--store", str(runs["store"]), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["comparable"] is False and doc["geomean_ratio"] is None
    assert "different problems: vecadd vs row_softmax" in doc["reason"]
    assert {c["mark"] for c in doc["cases"]} == {"x"}
    # the same compare within one problem is a real comparison
    doc = json.loads(cli("compare", a, a, "--store", str(runs["store"]), "--json").stdout)
    assert doc["comparable"] is True


def test_the_cli_rejects_a_folder_that_is_not_a_problem_and_an_unknown_suite(runs, tmp_path):
    kernel = runs["kernels"] / "vadd_ok.py"
    proc = cli("run", str(kernel), "--problem", str(tmp_path), "--device", "cpu", "--store", str(tmp_path / "s.db"))
    assert proc.returncode == 2 and "lacks task.yml, reference.py" in proc.stderr
    proc = cli("run", str(kernel), "--problem", str(runs["vecadd"]), "--suite", "qr_v2", "--store", str(tmp_path / "s"))
    assert proc.returncode == 2 and "unknown suite 'qr_v2' for workload vecadd" in proc.stderr
    assert not (tmp_path / "s").exists()


def test_check_implementation_conventions():
    assert _verdict((True, "")).passed and _verdict("").passed and _verdict(None).passed
    assert _verdict((False, "bad")).message == "bad" and not _verdict("off by 2").passed
    assert _verdict("off by 2").message == "off by 2"


def test_args_case_label_is_seed_free_and_spec_carries_the_seed():
    case = ArgsCase.from_args({"m": 64, "k": 32, "seed": 5})
    assert case.spec == "m=64 k=32 seed=5" and case.label == "m=64 k=32"
    assert case.with_seed(9).spec == "m=64 k=32 seed=9" and case.input_count() == 1


# ------------------------------------------------------------------------------------------------ dashboard


@pytest.fixture
def dashboard(runs, tmp_path, monkeypatch):
    """The pages on a copy of the two-problem store, no GPU, no samples; problem folders and kernels from `runs`."""
    import shutil

    import streamlit as st

    from tracker.capture import envinfo

    store = tmp_path / "store.duckdb"
    shutil.copy(runs["store"], store)
    (tmp_path / "no-samples").mkdir()
    (runs["vecadd"].parent / "notes").mkdir(exist_ok=True)  # a folder that is not a problem is not offered
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(store))  # the Benchmark page writes only its own store
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(tmp_path / "no-samples"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.setenv("KERNELBEAM_PROBLEMS_DIR", str(runs["vecadd"].parent))
    monkeypatch.setenv("KERNELBEAM_KERNELS_DIR", str(runs["kernels"]))
    envinfo.gpu_available.cache_clear()
    st.cache_data.clear()
    return store


def test_experiments_offers_the_problem_when_the_store_holds_several(dashboard):
    at = open_page()
    problem = at.selectbox(key="problem")
    assert problem.options == ["any", "row_softmax", "vecadd"]
    (grid,) = [df.value for df in at.dataframe if "best run" in df.value.columns]
    assert set(grid["problem"]) == {"vecadd", "row_softmax"}
    problem.select("vecadd").run()
    (grid,) = [df.value for df in at.dataframe if "best run" in df.value.columns]
    assert set(grid["variant"]) == {"vadd_ok", "vadd_wrong"} and "problem" not in grid.columns


def test_benchmark_page_runs_a_kernel_against_a_chosen_problem_folder(dashboard):
    from tracker.capture import jobs
    from tracker.store import Store

    at = open_page("pages/benchmark.py")
    problem = at.selectbox(key="bm_problem")
    assert problem.options == ["qr_v2 (built in)", "softmax", "vecadd"]
    problem.select("vecadd").run()
    assert at.selectbox(key="bm_suite").options == ["smoke"]
    assert at.multiselect(key="bm_cases").options == ["0: size=16 seed=11"]
    at.selectbox(key="bm_kernel").select("vadd_ok.py")
    at.selectbox(key="bm_mode").select("test")
    at.button(key="bm_start").click().run()
    assert not at.error and "vecadd · smoke/test" in "\n".join(str(s.value) for s in at.success)
    (job,) = jobs.list_jobs(dashboard)
    assert job.spec["request"]["problem"] == str(runs_folder(dashboard, "vecadd"))
    final = jobs.wait(job, timeout=200)
    assert final["state"] == "finished" and final["status"] == "passed", jobs.log_tail(job)
    assert Store(dashboard).get_run(final["run_id"])["problem"] == "vecadd"
    with pytest.raises(ValueError, match="not a folder directly under the problems folder"):
        jobs.start_job(dashboard, "vadd_ok.py", suite="smoke", problem="../kernels")
    with pytest.raises(ValueError, match="not a problem folder"):
        jobs.start_job(dashboard, "vadd_ok.py", suite="smoke", problem="notes")


def runs_folder(store: Path, name: str) -> Path:
    import os

    return Path(os.environ["KERNELBEAM_PROBLEMS_DIR"]).resolve() / name


def test_compare_runs_refuses_different_problems_and_warns_on_a_changed_definition():
    from tracker.analysis.stats import CaseData, compare_runs

    a = {"n=1": CaseData([10.0, 10.1, 9.9, 10.0]), "n=2": CaseData([20.0, 20.2, 19.8, 20.1])}
    b = {"n=1": CaseData([12.0, 12.1, 11.9, 12.0]), "n=2": CaseData([20.0, 20.1, 19.9, 20.0])}
    gpus = {"gpu_a": "H200", "gpu_b": "H200"}
    other = compare_runs(a, b, **gpus, problem_a="vecadd", problem_b="softmax")
    assert (
        not other.comparable and other.geomean_ratio is None and other.reason == "different problems: vecadd vs softmax"
    )
    assert {c.verdict for c in other.cases} == {"n/a"}
    changed = compare_runs(
        a, b, **gpus, problem_a="p", problem_b="p", problem_hash_a="aa" * 32, problem_hash_b="bb" * 32
    )
    assert changed.comparable and "warning: the problem's files differ between the runs" in changed.reason
    same = compare_runs(a, b, **gpus, problem_a="p", problem_b="p", problem_hash_a="aa" * 32, problem_hash_b="aa" * 32)
    assert same.comparable and "warning" not in same.reason
    assert compare_runs(a, b, **gpus).comparable  # runs from before problems were recorded: both qr_v2


def test_compare_page_warns_that_runs_of_different_problems_are_not_compared(dashboard, runs):
    at = open_page("pages/compare.py", a=runs["vadd_bench"]["run_id"], b=runs["sm_in_place"]["run_id"])
    warnings = "\n".join(str(w.value) for w in at.warning)
    assert "Different problems: A was judged by **vecadd**, B by **row\\_softmax**" in warnings  # names escaped
    assert "different problems\\: vecadd vs row\\_softmax" in "\n".join(str(c.value) for c in at.caption)


def test_a_repetition_times_a_batch_of_inputs_sized_as_the_contest_sizes_it(runs, tmp_path):
    # 4096 float32 twice is 32 KiB: 50 inputs (the cap) per repetition, seeds seed+42, seed+84, ...
    (inputs,) = rows(runs["store"], "SELECT inputs FROM case_results WHERE run_id = ?", [runs["vadd_bench"]["run_id"]])[
        0
    ]
    assert inputs == 50
    folder = ProblemFolder(runs["vecadd"])
    (case,) = folder.suites["vecadd"].benchmarks
    made = folder.benchmark_inputs(case)
    assert len(made) == 50 and all(x[0].shape == (4096,) for x in made)
    assert made[0][0].equal(folder.generate(case, 13 + 42)[0]) and made[1][0].equal(folder.generate(case, 13 + 84)[0])
    big = write_folder(tmp_path / "big", {**VECADD, "task.yml": "benchmarks:\n  - {size: 16777216, seed: 1}\n"})
    assert len(ProblemFolder(big).benchmark_inputs(ProblemFolder(big).suites["big"].benchmarks[0])) == 2  # 128 MiB
    fixed = write_folder(tmp_path / "fixed", {**VECADD, "task.yml": VECADD["task.yml"] + "benchmark_inputs: 3\n"})
    assert len(ProblemFolder(fixed).benchmark_inputs(ProblemFolder(fixed).suites["fixed"].benchmarks[0])) == 3
    bad = write_folder(tmp_path / "bad", {**VECADD, "task.yml": VECADD["task.yml"] + "benchmark_inputs: 0\n"})
    with pytest.raises(InputError, match="benchmark_inputs"):
        ProblemFolder(bad)


def _checker_without_room(tmp_path: Path, name: str, failures: int) -> tuple[Path, Path]:
    """A vector-add folder whose checker runs out of GPU memory (torch's own exception, raised on the CPU) on its
    first `failures` calls for the 257-element case, and a correct kernel for it."""
    raising = dict(VECADD)
    raising["reference.py"] = (
        VECADD["reference.py"].replace(
            "    expected = ref_kernel(data)\n",
            "    global CALLS\n"
            "    if data[0].numel() == 257 and CALLS < FAILURES:\n"
            "        CALLS += 1\n"
            "        raise torch.cuda.OutOfMemoryError('CUDA out of memory (a stand-in: a checker with no room)')\n"
            "    expected = ref_kernel(data)\n",
        )
        + f"\n\nCALLS, FAILURES = 0, {failures}\n"
    )
    folder = write_folder(tmp_path / "problems" / name, raising)
    kernel = tmp_path / "vadd_ok.py"
    kernel.write_text(VECADD_OK)
    return folder, kernel


def test_a_checker_out_of_gpu_memory_hands_its_cache_back_and_judges_again(tmp_path):
    """The checker shares the GPU with the kernel's process; where it runs out of memory once it frees its cached
    blocks and judges the same outputs again."""
    folder, kernel = _checker_without_room(tmp_path, "vecadd_tight", failures=1)
    doc = run_json(tmp_path / "s.duckdb", kernel, folder, "--mode", "test", "--suite", "vecadd_tight")
    assert doc["status"] == "passed", doc


def test_a_case_the_checker_could_not_judge_is_named_so_in_the_runs_error(tmp_path):
    """Where the second try runs out of memory too, the run fails, as a case without a verdict must, but its error
    says the answer was not judged, so no one reads it as a wrong result."""
    folder, kernel = _checker_without_room(tmp_path, "vecadd_oom", failures=2)
    doc = run_json(tmp_path / "s.duckdb", kernel, folder, "--mode", "test", "--suite", "vecadd_oom")
    assert doc["status"] == "failed"
    assert [c["passed"] for c in doc["cases"]] == [True, False]
    assert doc["error"].startswith("1 case(s) failed: size=257 seed=12; 1 of them not judged, ")
    assert "the checker raised OutOfMemoryError: CUDA out of memory (a stand-in" in doc["error"], doc["error"]
