"""`run FILE --problem DIR --method contest` (issue 19, item 1) with a problem folder and a harness of our own that
speaks the contest's protocol: the run folder laid out from task.yml's `files:` (a relative `../../` source
included), the cases as `key: value; key: value` lines, eval.py MODE FILE with POPCORN_FD and POPCORN_SEED, and
what it reports recorded through the real CLI, sandbox and store.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.store import Store

ROOT = Path(__file__).resolve().parent.parent

TASK_YML = """name: toy_double
files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "task.py", "source": "task.py"}
  - {"name": "utils.py", "source": "../../shared/utils.py"}
  - {"name": "reference.py", "source": "reference.py"}
  - {"name": "eval.py", "source": "eval.py"}
tests:
  - {"size": 4, "seed": 11}
  - {"size": 8, "seed": 12}
benchmarks:
  - {"size": 16, "seed": 21}
  - {"size": 32, "seed": 22}
"""
REFERENCE = """from utils import make_data


def generate_input(size, seed):
    return make_data(size, seed)


def ref_kernel(data):
    return [2 * x for x in data]


def check_implementation(data, output):
    return (output == ref_kernel(data), "" if output == ref_kernel(data) else "wrong values")
"""
UTILS = """def make_data(size, seed):
    return [(seed * 7919 + i * 104729) % 1000 for i in range(size)]
"""
# Our own harness: the contest's channel and report keys, nothing of its code. BEHAVIOUR picks how it misbehaves.
HARNESS = r"""import math, os, sys, time

BEHAVIOUR = "@BEHAVIOUR@"
HANG_TOKEN = "@TOKEN@"


def main():
    out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")

    def log(key, value):
        print(f"{key}: {value}", file=out, flush=True)

    mode, lines = sys.argv[1], open(sys.argv[2]).read().splitlines()
    seed = os.environ.get("POPCORN_SEED")
    from reference import check_implementation, generate_input
    from submission import custom_kernel

    kind = "test" if mode == "test" else "benchmark"
    log(f"{kind}-count", len(lines))
    ok = True
    for i, line in enumerate(lines):
        args = {k.strip(): int(v) for k, v in (part.split(":") for part in line.split(";"))}
        if seed:
            args["seed"] += int(seed)
        log(f"{kind}.{i}.spec", "size: 999; seed: 1" if BEHAVIOUR == "garbage" and i == 1 else line)
        if BEHAVIOUR == "hang" and i == 1:  # in a child this test can tell from other tests' harnesses
            import subprocess

            subprocess.run([sys.executable, "-c", "import time; time.sleep(3600)", HANG_TOKEN])
        data = generate_input(**args)
        good, message = check_implementation(data, custom_kernel(data))
        if not good:
            log(f"{kind}.{i}.status", "fail")
            log(f"{kind}.{i}.error", f"{message} (POPCORN_SEED={seed})")
            ok = False
            break
        if kind == "test":
            log(f"{kind}.{i}.status", "pass")
            log(f"{kind}.{i}.message", f"POPCORN_SEED={seed}")
            continue
        times = []
        for _ in range(5):
            t = time.perf_counter_ns()
            custom_kernel(data)
            times.append(max(time.perf_counter_ns() - t, 1))
        mean = sum(times) / len(times)
        std = math.sqrt(sum((x - mean) ** 2 for x in times) / (len(times) - 1))
        for key, value in (("runs", 5), ("mean", mean), ("std", std), ("err", std / math.sqrt(5)),
                           ("best", min(times)), ("worst", max(times))):
            log(f"{kind}.{i}.{key}", value)
    log("check", "pass" if ok else "fail")
    return 0 if ok else 112


sys.exit(main())
"""
GOOD = "def custom_kernel(data):\n    return [2 * x for x in data]\n"
WRONG = "def custom_kernel(data):\n    return [3 * x for x in data]\n"


def hang_marker(folder: Path) -> tuple[str, ...]:
    """The argv (less the interpreter) of the child a 'hang' harness sleeps in. Every harness of these tests runs
    `eval.py benchmark kernelbeam-cases.txt`, and other tests (another xdist worker, another checkout's CI) run
    theirs at the same time, so a test waits on its own folder's token, not on the harness's command line."""
    token = "kb-hang-" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    return ("-c", "import time; time.sleep(3600)", token)


def problem(tmp_path: Path, behaviour: str = "good") -> Path:
    folder = tmp_path / "problems" / "toy"
    folder.mkdir(parents=True)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "utils.py").write_text(UTILS)
    (folder / "task.yml").write_text(TASK_YML)
    (folder / "reference.py").write_text(REFERENCE)
    (folder / "task.py").write_text("input_t = list\noutput_t = list\n")
    harness = HARNESS.replace("@BEHAVIOUR@", behaviour).replace("@TOKEN@", hang_marker(folder)[-1])
    (folder / "eval.py").write_text(harness)
    return folder


def run(tmp_path: Path, behaviour: str, source: str, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    folder = problem(tmp_path, behaviour)
    kernel = tmp_path / "double.py"
    kernel.write_text(source)
    store = tmp_path / "runs.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "run", str(kernel), "--problem", str(folder), "--method", "contest",
         "--store", str(store), "--json", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc, store


def stored(store: Path, run_id: str) -> dict:
    return Store(store).run_bundle(run_id)


def test_a_good_harness_report_is_the_run_with_its_method_and_harness_hashes(tmp_path):
    proc, store = run(tmp_path, "good", GOOD, "--suite", "toy_double")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "passed" and doc["geomean_us"] > 0
    assert not doc["warnings"], doc["warnings"]  # it has no profile stage to call unfinished
    bundle = stored(store, doc["run_id"])
    row = bundle["run"]
    assert row["method"] == "contest" and row["problem"] == "toy_double"
    hashes = json.loads(row["harness_files"])
    folder = tmp_path / "problems" / "toy"
    assert hashes == {
        name: hashlib.sha256(path.read_bytes()).hexdigest()
        for name, path in (
            ("task.py", folder / "task.py"),
            ("utils.py", tmp_path / "shared" / "utils.py"),
            ("reference.py", folder / "reference.py"),
            ("eval.py", folder / "eval.py"),
        )
    }  # fmt: skip the relative ../../shared/utils.py included; the submission is the variant, not the harness
    cases = bundle["cases"]
    assert list(cases["spec"]) == ["size=16 seed=21", "size=32 seed=22"] and cases["passed"].all()
    assert (cases["runs"] == 5).all() and (cases["mean_us"] > 0).all() and (cases["best_us"] <= cases["worst_us"]).all()
    assert row["sandbox"] and not row["sandbox"].startswith("off")


def test_the_seed_reaches_the_harness_and_a_failing_report_fails_the_run(tmp_path):
    proc, store = run(tmp_path, "good", WRONG, "--mode", "test", "--seed", "7", "--suite", "toy_double")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["status"] == "failed" and doc["cases"][0]["message"] == "wrong values (POPCORN_SEED=7)"
    assert not doc["cases"][1]["passed"] and "2 case(s) failed" in doc["error"]  # it stopped at the first failure


def test_a_report_that_names_other_cases_fails_the_case_it_garbled(tmp_path):
    proc, store = run(tmp_path, "garbage", GOOD, "--suite", "toy_double")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["status"] == "failed"
    first, second = doc["cases"]
    assert first["passed"] and not second["passed"] and "it was given 'size: 32; seed: 22'" in second["message"]


def test_a_hanging_harness_times_out_and_is_ended(tmp_path):
    proc, store = run(tmp_path, "hang", GOOD, "--suite", "toy_double", "--timeout", "2")
    doc = json.loads(proc.stdout)
    assert doc["status"] == "timeout" and "timeout of 2 s" in doc["error"]
    assert doc["cases"][0]["passed"] and not doc["cases"][1]["passed"]
    from tests.conftest import wait_no_process

    # the harness's child too: the whole process tree of the run is ended
    assert not wait_no_process(*hang_marker(tmp_path / "problems" / "toy"), seconds=5, any_program=True)


def test_a_kernel_that_fills_the_harness_folder_fails_the_run(tmp_path, monkeypatch):
    """The contest method's run folder is bounded as the tracker's own: the kernel writes at import, in the harness's
    process, until the run ends as its failure."""
    monkeypatch.setenv("KERNELBEAM_RUN_FOLDER_GB", "0.02")
    fill = "import os, time\nfor n in range(4000):\n    open(f'fill-{n // 8}.bin', 'ab').write(os.urandom(1 << 20))\n"
    proc, _ = run(tmp_path, "good", fill + "    time.sleep(0.005)\n" + GOOD, "--suite", "toy_double")
    doc = json.loads(proc.stdout)
    assert doc["status"] == "failed", doc
    assert doc["error"] == "the kernel's run folder holds more than 0.02 GB ($KERNELBEAM_RUN_FOLDER_GB sets the size)"


def test_sigterm_to_the_tracker_records_the_run_cancelled_and_ends_the_harness(tmp_path):
    from tests.conftest import wait_no_process, wait_process

    folder = problem(tmp_path, "hang")
    kernel = tmp_path / "double.py"
    kernel.write_text(GOOD)
    store = tmp_path / "runs.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracker", "run", str(kernel), "--problem", str(folder), "--method", "contest",
         "--store", str(store), "--json", "--suite", "toy_double"],  # the whole suite: its second case hangs
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    harness = hang_marker(folder)  # the harness's sleeping child, under whichever path the sandbox runs python
    try:
        assert wait_process(*harness, seconds=60, any_program=True), "the harness never reached its hang"
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + 15, err
    runs = Store(store).list_runs()
    assert len(runs) == 1
    bundle = stored(store, runs.iloc[0]["run_id"])
    assert bundle["run"]["status"] == "cancelled", bundle["run"]
    assert "SIGTERM" in bundle["run"]["error"]
    assert not wait_no_process(*harness, seconds=10, any_program=True)


@pytest.mark.parametrize("bad", ["no-files", "no-problem"])
def test_the_method_needs_a_problem_folder_with_a_files_list(tmp_path, bad):
    folder = problem(tmp_path)
    if bad == "no-files":
        (folder / "task.yml").write_text(
            TASK_YML.split("tests:")[0].split("files:")[0] + "tests:" + TASK_YML.split("tests:")[1]
        )
    kernel = tmp_path / "double.py"
    kernel.write_text(GOOD)
    args = ["--problem", str(folder)] if bad == "no-files" else []
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "run", str(kernel), *args, "--method", "contest",
         "--store", str(tmp_path / "s.duckdb"), "--json", "--suite", "toy_double" if args else "smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if bad == "no-problem":
        assert proc.returncode == 2 and "needs --problem" in proc.stderr
    else:
        doc = json.loads(proc.stdout)
        assert doc["status"] == "failed" and "no `files:` list" in doc["error"]


@pytest.mark.parametrize("route", ["a link in the folder", "an absolute path", "a relative path to /proc"])
def test_a_task_yml_never_copies_the_key_the_sandbox_hides_into_the_run_folder(tmp_path, route):
    """A crafted problem folder names the side-file key as a file of its run (through a link in the folder, or
    by its absolute path): the run folder would hold a readable copy of what the sandbox masks."""
    key = tmp_path / "state" / "side-file.key"
    key.parent.mkdir()
    key.write_text("ab" * 32 + "\n")
    folder = problem(tmp_path)
    if route == "a link in the folder":
        (folder / "extra.txt").symlink_to(key)
        source = "extra.txt"
    elif route == "an absolute path":
        source = str(key)
    else:  # the runner's own environment (its token), as the kernel in the sandbox would read the copy
        source = "../" * len(folder.parts) + "proc/self/environ"
    yml = TASK_YML.replace("tests:", f'  - {{"name": "extra.txt", "source": "{source}"}}\ntests:', 1)
    (folder / "task.yml").write_text(yml)
    kernel = tmp_path / "double.py"
    kernel.write_text(GOOD)
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "run", str(kernel), "--problem", str(folder), "--method", "contest",
         "--store", str(tmp_path / "s.duckdb"), "--json", "--suite", "toy_double"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "KERNELBEAM_KEY_FILE": str(key)},
    )  # fmt: skip
    doc = json.loads(proc.stdout)
    assert doc["status"] == "failed" and "which is not a file of the problem" in doc["error"], doc
    assert "ab" * 32 not in json.dumps(stored(tmp_path / "s.duckdb", doc["run_id"]), default=str)


TORCH_REFERENCE = """import torch


def generate_input(size, seed):
    return torch.rand(size, generator=torch.Generator().manual_seed(seed))


def ref_kernel(data):
    return data * 2


def check_implementation(data, output):
    good = isinstance(output, torch.Tensor) and torch.equal(output, data * 2)
    return (good, "" if good else "wrong values")
"""


def fidelity_session(tmp_path: Path, rounds: int) -> tuple[list[str], Path]:
    """The command line of a fidelity session of a doubling kernel over the toy folder, and its store."""
    folder = problem(tmp_path)
    (folder / "reference.py").write_text(TORCH_REFERENCE)  # the tracker's checker takes tensors
    kernel = tmp_path / "double.py"
    kernel.write_text("def custom_kernel(data):\n    return data * 2\n")
    store = tmp_path / "runs.duckdb"
    cmd = [sys.executable, "-m", "tracker", "fidelity", str(kernel), "--problem", str(folder), "--rounds",
           str(rounds), "--suite", "toy_double", "--cases", "0", "--store", str(store), "--json"]  # fmt: skip
    return cmd, store


def test_fidelity_alternates_the_two_methods_and_reports_whether_the_tracker_is_inside(tmp_path):
    cmd, store = fidelity_session(tmp_path, 2)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["cases"]) == 1, doc["cases"]
    (case,) = doc["cases"]
    assert doc["rounds"] == 2 and len(doc["contest_runs"]) == len(doc["tracker_runs"]) == 2
    assert len(case["contest_means_us"]) == len(case["tracker_means_us"]) == 2
    assert case["contest_min_us"] <= case["contest_max_us"] and isinstance(case["inside"], bool)
    # the paired test on tracker / contest per round, as `ab` judges B / A
    by_round = [t / c for c, t in zip(case["contest_means_us"], case["tracker_means_us"], strict=True)]
    assert case["ratios"] == pytest.approx(by_round, rel=1e-12) and case["reads"] in ("low", "high", "same")
    assert case["ci_low"] <= case["ratio"] <= case["ci_high"]
    assert abs(case["ratio"] - math.exp(sum(math.log(r) for r in by_round) / 2)) < 1e-9
    methods = {r: stored(store, r)["run"]["method"] for r in doc["contest_runs"] + doc["tracker_runs"]}
    assert [methods[r] for r in doc["contest_runs"]] == ["contest"] * 2
    assert all(methods[r] is None for r in doc["tracker_runs"])  # the tracker's own method, as every plain run
    cmp = subprocess.run(
        [sys.executable, "-m", "tracker", "compare", doc["contest_runs"][0], doc["tracker_runs"][0], "--store",
         str(store), "--json"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    shown = json.loads(cmp.stdout)
    assert shown["methods"] == ["contest", "tracker"] and shown["pair"]["pair_id"] == doc["pair_id"]
    # compare of two runs of the session shows the session's fidelity table too, as the session printed it
    assert shown["fidelity"]["cases"] == doc["cases"] and doc["stopped"] is False


def test_a_fidelity_session_stopped_by_sigterm_still_reports_its_rounds(tmp_path):
    """A session cut by SIGTERM (a deadline, Ctrl-C from a wrapper) prints the table of what its stored runs say
    and exits 143; a SIGTERM between two runs, where no run's wait loop catches it, stops it just the same."""
    import signal
    import time

    cmd, store = fidelity_session(tmp_path, 4)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = []
    deadline = time.monotonic() + 240
    while len(done) < 2 and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if line.startswith("round 1/4: "):
            done.append(line)
    assert len(done) == 2, done  # round 1 is stored on both sides; the signal lands in round 2 or between runs
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    doc = json.loads(out)
    assert doc["stopped"] is True and len(doc["contest_runs"]) >= 1 and len(doc["tracker_runs"]) >= 1
    (case,) = doc["cases"]
    assert case["contest_means_us"] and case["tracker_means_us"] and isinstance(case["inside"], bool)
    assert "stopped by SIGTERM" in err
    statuses = [r["status"] for r in Store(store).list_runs().to_dict("records")]
    assert len(statuses) < 8 and statuses.count("passed") >= 2, statuses
    # --resume goes on with the cut session: one more round, numbered after the stored ones, in the same table
    last = int(Store(store).pair_runs(doc["pair_id"])["runs"]["pair_round"].max())
    more = [*cmd[: cmd.index("--rounds")], "--rounds", "1", *cmd[cmd.index("--rounds") + 2 :]]
    proc = subprocess.run([*more, "--resume", doc["pair_id"]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    resumed = json.loads(proc.stdout)
    assert resumed["pair_id"] == doc["pair_id"] and resumed["rounds"] == last + 2, resumed
    assert len(resumed["contest_runs"]) == len(doc["contest_runs"]) + 1
    assert len(resumed["tracker_runs"]) == len(doc["tracker_runs"]) + 1
    assert f"round {last + 2}/{last + 2}: " in proc.stderr
    # ... but only with the source and cases it ran
    other = Path(cmd[4]).with_name("triple.py")
    other.write_text("def custom_kernel(data):\n    return data * 3\n")
    for wrong, why in ((["--cases", "1"], "ran cases 0"), (["--resume", "0123456789ab"], "no paired session")):
        proc = subprocess.run([*more, "--resume", doc["pair_id"], *wrong], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    changed = [*more[:4], str(other), *more[5:], "--resume", doc["pair_id"]]
    proc = subprocess.run(changed, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2 and "ran another source" in proc.stderr, proc.stderr


def test_a_contest_method_run_is_never_ranked_anywhere(tmp_path):
    """The harness shares its process with the kernel, which can write the report itself: a contest-method run
    (however fast) is no cell, geomean or best run of the board, no new best of `since`, no variant's best; the
    tracker's runs are."""
    from datetime import timedelta

    from conftest import T0, make_record

    from tracker.analysis.summaries import since_summary

    store = tmp_path / "s.duckdb"
    ours = make_record("ours00000001", variant="k", source="# k\n", path="k.py", family="f", started=T0,
                       means=[100.0] * 12)  # fmt: skip
    forged = make_record("cont00000001", variant="k", source="# k\n", path="k.py", family="f", started=T0,
                         means=[0.001] * 12)  # fmt: skip
    forged.run.method = "contest"
    for record in (ours, forged):
        assert Store(store).finish_run(record) is None
    board = Store(store).leaderboard_cells(suite="qr_v2", gpu=forged.run.gpu)
    assert board["variants"]["best_run"].tolist() == ["ours00000001"]
    assert set(board["cells"]["run_id"]) == {"ours00000001"} and board["cells"]["best_us"].min() > 50
    bests = since_summary(Store(store).since_activity(T0 - timedelta(days=1)))["new_bests"]
    assert bests and {b["run_id"] for b in bests} == {"ours00000001"}
    assert Store(store).variant_table(suite="qr_v2")["best_run"].tolist() == ["ours00000001"]
    lineage = Store(store).lineage_nodes(suite="qr_v2", gpu=forged.run.gpu)
    assert (
        lineage["best_run"].tolist() == ["ours00000001"] and Store(store).variant_list()["best_geomean_us"].min() > 50
    )
