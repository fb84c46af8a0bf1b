"""The command line, as an agent uses it: `python -m tracker run|list|show|compare|verdict|export|import`, one JSON
document on stdout with --json, exit codes 0 / 1 / 2, and a clear message without a traceback for bad input."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import tracker_cli as cli
from tests.conftest import tracker_json as cli_json
from tracker.capture.runner import RunRequest, run_variant
from tracker.store import Store
from tracker.workloads.base import SMOKE_MAX_REPS

# One worker takes the whole module, so its `bench` run (with a profile) is made once, not once per xdist worker.
pytestmark = [pytest.mark.timeout(180), pytest.mark.xdist_group("cli_bench")]

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "kernels/geqrf_reference.py"
VARIANTS = Path(__file__).resolve().parent / "variants"
RUN_KEYS = {"run_id", "status", "suite", "mode", "gpu", "geomean_us", "cases"}
CASE_KEYS = {"spec", "passed", "message", "mean_us", "err_us", "best_us", "worst_us", "runs"}
LIST_KEYS = {"run_id", "variant", "path", "status", "suite", "mode", "gpu", "geomean_us", "started_at"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """One store with two CPU benchmark runs of smoke case 0: A through the CLI (--json, --profile), B through
    the runner, of a copy of the reference kernel."""
    folder = tmp_path_factory.mktemp("cli")
    store = folder / "runs.duckdb"
    proc = cli(
        "run", REFERENCE, "--suite", "smoke", "--mode", "benchmark", "--cases", "0", "--json", "--profile",
        "--family", "ref", "--note", "baseline run", "--store", str(store), timeout=150,
    )  # fmt: skip
    copy = folder / "geqrf_copy.py"
    shutil.copy(ROOT / REFERENCE, copy)
    parent = json.loads(proc.stdout)["run_id"] if proc.returncode == 0 else None
    other = run_variant(
        RunRequest(
            path=str(copy), suite="smoke", mode="benchmark", cases=[0], store=str(store), timeout=150, parent=parent
        )
    )
    assert other.status == "passed", other.record.run.error
    return {"store": store, "proc": proc, "b": other.run_id}


def test_a_whole_suite_run_scores_the_geometric_mean_of_its_case_means(tmp_path):
    proc = cli("run", REFERENCE, "--suite", "smoke", "--json", "--quiet", "--store", str(tmp_path / "s.duckdb"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    means = [c["mean_us"] for c in doc["cases"]]
    assert len(means) == 4 and all(m > 0 for m in means)
    assert doc["geomean_us"] == pytest.approx(math.prod(means) ** (1 / len(means)))
    # a CPU clock never meets the stop rule: a smoke case stops at the suite's cap, not the contest's 200
    assert all(3 <= c["runs"] <= SMOKE_MAX_REPS for c in doc["cases"])


def test_run_json_prints_one_object_with_the_documented_keys(bench):
    proc = bench["proc"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert set(doc) >= RUN_KEYS
    assert doc["status"] == "passed" and doc["suite"] == "smoke" and doc["mode"] == "benchmark"
    assert doc["gpu"] == "CPU"
    (case,) = doc["cases"]
    assert set(case) >= CASE_KEYS
    assert case["spec"] == "8x16 c1 s201 dense" and case["passed"] is True and case["message"] == ""
    assert case["runs"] >= 3
    assert 0 < case["best_us"] <= case["mean_us"] <= case["worst_us"]
    assert 0 <= case["err_us"] < case["mean_us"]
    assert doc["geomean_us"] is None  # a subset of the suite (--cases) has no score, as in the contest
    assert "1/1" in proc.stderr and "pass" in proc.stderr  # the progress line goes to stderr


def test_a_run_says_where_its_cases_wall_time_went(bench, tmp_path):
    """`time` in `run --json`: the cases' wall time by the runner's clock, split into the timed repetitions (which
    are the stored samples times the inputs per repetition), the checker's time on the outputs, and the rest. On
    the H200 a fused_wy run spent 12 of its 302 s in timed repetitions, which is why this is shown."""
    doc = json.loads(bench["proc"].stdout)
    split = doc["time"]
    times = Store(bench["store"]).run_samples(doc["run_id"])["time_us"].tolist()
    assert split["timed_s"] == pytest.approx(sum(times) * 4 / 1e6)  # smoke case 0: 4 inputs a repetition
    assert 0 < split["timed_s"] < split["cases_s"] and 0 < split["checking_s"] < split["cases_s"]
    assert split["recheck_s"] == 0  # the harness's recheck in the timing process runs on a GPU only
    assert split["rest_s"] == pytest.approx(split["cases_s"] - split["timed_s"] - split["checking_s"])
    run = Store(bench["store"]).get_run(doc["run_id"])
    assert split["cases_s"] < (run["finished_at"] - run["started_at"]).total_seconds()
    shown = cli("run", REFERENCE, "--suite", "smoke", "--cases", "0", "--quiet", "--store", str(tmp_path / "t.duckdb"))
    assert "time in the cases: " in shown.stdout and ", of which timed " in shown.stdout, shown.stdout


def test_the_time_split_takes_the_longer_of_checker_and_recheck_and_ignores_an_impossible_recheck():
    """The checker judges while the timing process rechecks (GPU), so only the longer of the two leaves the rest;
    a recheck time the worker reports beyond its case's wall time (a forged event) counts as none."""
    from tracker.capture.record import time_split

    def case(idx: int, start: float, end: float, **done) -> list[dict]:
        return [{"event": "case_start", "case_idx": idx, "elapsed_s": start},
                {"event": "case_done", "case_idx": idx, "elapsed_s": end, "samples": [1e6], "case": {"inputs": 2},
                 **done}]  # fmt: skip

    split = time_split(case(0, 1.0, 11.0, check_s=3.0, recheck_s=5.0) + case(1, 11.0, 21.0, check_s=4.0))
    assert split == {"cases_s": 20.0, "timed_s": 4.0, "checking_s": 7.0, "recheck_s": 5.0, "rest_s": 9.0}
    forged = time_split(case(0, 1.0, 11.0, check_s=3.0, recheck_s=1e9))
    assert forged["recheck_s"] == 0 and forged["rest_s"] == 5.0


def test_every_sample_is_kept_and_the_stats_are_theirs(bench):
    store, run_id = bench["store"], json.loads(bench["proc"].stdout)["run_id"]
    (case,) = Store(store).case_results(run_id).to_dict("records")
    times = Store(store).run_samples(run_id)["time_us"].tolist()
    assert len(times) == case["runs"]
    assert case["mean_us"] == pytest.approx(sum(times) / len(times))
    assert case["best_us"] == min(times) and case["worst_us"] == max(times)
    std = math.sqrt(sum((t - case["mean_us"]) ** 2 for t in times) / (len(times) - 1))
    assert case["std_us"] == pytest.approx(std) and case["err_us"] == pytest.approx(std / math.sqrt(len(times)))
    assert case["inputs"] == 4 and case["kind"] == "benchmark"
    run = Store(store).get_run(run_id)
    assert run["family"] == "ref" and run["note"] == "baseline run" and run["trigger"] == "cli"


def test_profile_rows_and_the_trace_file_are_kept(bench):
    store, run_id = bench["store"], json.loads(bench["proc"].stdout)["run_id"]
    bundle = Store(store).run_bundle(run_id)
    (prof,) = bundle["profile_cases"].to_dict("records")
    assert prof["case_idx"] == 0 and prof["host_us"] > 0
    assert Path(prof["trace_path"]).is_file()
    assert Path(prof["trace_path"]).is_relative_to(Path(f"{store}.traces"))
    json.loads(Path(prof["trace_path"]).read_text())  # a Chrome trace is JSON
    kernels = bundle["profile_kernels"]["kernel"].tolist()
    assert any("geqrf" in k for k in kernels), kernels


def test_list_json_has_the_documented_keys(bench):
    runs = cli_json("list", "--store", str(bench["store"]))
    assert len(runs) == 2
    for run in runs:
        assert set(run) >= LIST_KEYS
        assert run["gpu"] == "CPU" and run["status"] == "passed"
    a = json.loads(bench["proc"].stdout)["run_id"]
    assert [r["run_id"] for r in runs] == [bench["b"], a]  # newest first
    assert {r["variant"] for r in runs} == {"geqrf_reference", "geqrf_copy"}
    assert runs[1]["started_at"] < runs[0]["started_at"]
    assert Store(bench["store"]).get_run(bench["b"])["parent_run"] == a
    text = cli("list", "--store", str(bench["store"]))
    assert text.returncode == 0 and bench["b"] in text.stdout and "geqrf_copy" in text.stdout


def test_show_json_by_id_prefix(bench):
    run_id = json.loads(bench["proc"].stdout)["run_id"]
    doc = cli_json("show", run_id[:8], "--store", str(bench["store"]))
    assert doc["run_id"] == run_id and doc["status"] == "passed" and doc["gpu"] == "CPU"
    assert doc["variant"] == "geqrf_reference" and doc["path"] == REFERENCE
    assert doc["git_commit"] and len(doc["git_commit"]) == 40  # recorded inside this repository
    (case,) = doc["cases"]
    assert case["passed"] is True and case["runs"] >= 3
    assert {"factor_res", "tril_res", "recon_res", "orth_res"} <= set(case)
    text = cli("show", run_id, "--store", str(bench["store"]))
    assert text.returncode == 0 and "8x16 c1 s201 dense" in text.stdout and "geomean" in text.stdout
    assert re.search(r"\nstarted_at +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\n", text.stdout), (
        text.stdout
    )  # to the second


def test_show_source_prints_the_file_the_run_ran_byte_for_byte(bench):
    text = cli("show", bench["b"], "--source", "--store", str(bench["store"]))
    assert text.returncode == 0, text.stderr
    assert text.stdout == (ROOT / REFERENCE).read_text()  # the copy's source, so the reference file's bytes


def test_compare_json_on_two_runs(bench):
    a = json.loads(bench["proc"].stdout)["run_id"]
    doc = cli_json("compare", a, bench["b"], "--store", str(bench["store"]))
    assert doc["a"] == a and doc["b"] == bench["b"]
    assert doc["comparable"] is True
    (case,) = doc["cases"]
    assert case["case"] == "8x16 c1 dense"
    assert case["mark"] in ("+", "-", "~") and case["ratio"] > 0
    assert doc["geomean_ratio"] == pytest.approx(case["ratio"])
    text = cli("compare", a, bench["b"], "--store", str(bench["store"]))
    assert text.returncode == 0 and "geomean ratio B/A" in text.stdout


def test_verdict_is_recorded(bench):
    store = str(bench["store"])
    assert cli_json("verdict", bench["b"], "rejected", "--reason", "no faster", "--store", store) == {
        "run_id": bench["b"],
        "verdict": "rejected",
    }
    bundle = Store(store).run_bundle(bench["b"])
    assert bundle["verdicts"][["verdict", "reason"]].values.tolist() == [["rejected", "no faster"]]
    bad = cli("verdict", bench["b"], "wonderful", "--store", store)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_export_and_import_commands(bench, tmp_path):
    out, other = tmp_path / "export", tmp_path / "other.duckdb"
    proc = cli("export", "--out", str(out), "--store", str(bench["store"]))
    assert proc.returncode == 0 and "exported 2 run(s)" in proc.stderr
    proc = cli("import", str(out), "--store", str(other))
    assert proc.returncode == 0 and "imported 2 new run(s)" in proc.stderr
    assert len(cli_json("list", "--store", str(other))) == 2
    assert "imported 0 new run(s)" in cli("import", str(out), "--store", str(other)).stderr


def test_a_failed_run_exits_1_with_its_message(tmp_path):
    store = tmp_path / "runs.duckdb"
    proc = cli("run", str(VARIANTS / "raises.py"), "--suite", "smoke", "--mode", "test", "--cases", "0", "--json",
               "--store", str(store))  # fmt: skip
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["status"] == "failed" and doc["geomean_us"] is None
    assert "kb-boom" in doc["cases"][0]["message"]
    assert cli_json("list", "--store", str(store))[0]["status"] == "failed"


def test_list_of_a_missing_store_is_an_error(tmp_path):
    proc = cli("list", "--json", "--store", str(tmp_path / "none.duckdb"))
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: no store at {tmp_path / 'none.duckdb'}"
    assert not (tmp_path / "none.duckdb").exists()


@pytest.mark.parametrize(
    "args,words",
    [
        (["run", "kernels/no_such_kernel.py", "--suite", "smoke"], "no kernel file at kernels/no_such_kernel.py"),
        (["run", REFERENCE, "--suite", "smoke", "--cases", "1,x"], "--cases takes case numbers"),
        (["run", REFERENCE, "--suite", "smoke", "--cases", "99"], "case 99 is out of range"),
        (["run", REFERENCE, "--suite", "nope"], "unknown suite 'nope' for workload qr_v2; choose from qr_v2, smoke"),
        (["run", REFERENCE, "--mode", "fastest"], "invalid choice: 'fastest'"),
        (["run", REFERENCE, "--suite", "smoke", "--timeout", "0"], "expected a finite number of seconds above 0"),
        (["run", REFERENCE, "--suite", "smoke", "--parent", "zzzz"], "--parent 'zzzz' is not a run"),
        (["run", "README.md", "--suite", "smoke"], "is not a Python file"),
        (["show", "zzzz"], "no run matches 'zzzz'"),
        (["compare", "zzzz", "yyyy"], "no run matches 'zzzz'"),
        (["verdict", "zzzz", "promoted"], "no run matches 'zzzz'"),
        (["export", "zzzz", "--out", "{tmp}/x"], "no run matches 'zzzz'"),
        (["import", "{tmp}"], "holds no runs.parquet"),
        (["show", "abc", "--store", "{tmp}/missing.duckdb"], "no store at"),
        (["list", "--store", "{tmp}/notes.duckdb"], "is not a DuckDB store"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message_and_no_traceback(bench, tmp_path, args, words):
    (tmp_path / "notes.duckdb").write_text("not a database\n" * 100)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--store" not in args:
        args += ["--store", str(bench["store"])]
    proc = cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
    assert len(Store(bench["store"]).list_runs()) == 2  # nothing was recorded


def test_repeated_case_numbers_are_refused_or_recorded_once(tmp_path):
    store = tmp_path / "runs.duckdb"
    proc = cli("run", REFERENCE, "--suite", "smoke", "--mode", "test", "--cases", "0,0", "--json", "--quiet",
               "--store", str(store))  # fmt: skip
    if proc.returncode == 2:
        assert "Traceback" not in proc.stderr and "0" in proc.stderr
        return
    doc = json.loads(proc.stdout)
    assert doc["side_file"] is None, proc.stderr
    assert Store(store).get_run(doc["run_id"])["status"] == "passed"


def test_parent_may_be_a_run_id_prefix_or_a_variant_name_and_is_stored_as_the_full_run_id(tmp_path):
    store = tmp_path / "s.duckdb"
    common = ["--suite", "smoke", "--cases", "0", "--quiet", "--store", str(store)]
    base = ["--mode", "test", *common]
    bench = cli_json("run", REFERENCE, "--mode", "benchmark", *common)["run_id"]
    first = cli_json("run", REFERENCE, *base)["run_id"]
    by_prefix = cli_json("run", REFERENCE, *base, "--parent", first[:6])["run_id"]
    by_name = cli_json("run", REFERENCE, *base, "--parent", "geqrf_reference")["run_id"]
    assert Store(store).get_run(by_prefix)["parent_run"] == first  # the full id, not the prefix
    assert Store(store).get_run(by_name)["parent_run"] == by_prefix  # the variant's newest run of this mode
    # a benchmark's parent by name is the variant's newest passed benchmark, not its newer test runs
    bench2 = cli_json("run", REFERENCE, "--mode", "benchmark", *common, "--parent", "geqrf_reference")["run_id"]
    assert Store(store).get_run(bench2)["parent_run"] == bench
    proc = cli("run", REFERENCE, *base, "--parent", "no_such_variant")
    assert proc.returncode == 2 and "nor a variant with runs there" in proc.stderr
