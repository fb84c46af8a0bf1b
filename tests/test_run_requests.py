"""Run requests are built in one place (tracker.cli.run.run_requests) for every route: one file, many files, a
folder, --glob, the queue (--gpus), the MCP server's start_run and the dashboard's jobs. Real runs on the CPU
against the problems/vectoradd folder."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tracker.capture import jobs
from tracker.capture.record import RunRequest
from tracker.cli.main import build_parser
from tracker.cli.mcp_server import Tools
from tracker.cli.run import run_requests

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "problems" / "vectoradd"
# One worker takes the whole module, so the runs behind `two_runs` are made once, not once per xdist worker.
pytestmark = pytest.mark.xdist_group("run_requests_runs")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def recorded(store: Path) -> list[tuple]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(
            "SELECT variant, problem, suite, mode, status, parent_run FROM runs ORDER BY variant"
        ).fetchall()


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("k")
    for name in ("a", "b"):
        (folder / f"{name}.py").write_text((PROBLEM / "submission.py").read_text())
    return folder


@pytest.fixture(scope="module")
def two_runs(kernels, tmp_path_factory) -> dict:
    """`run a.py b.py --problem ...`: the many-files route, recorded."""
    store = tmp_path_factory.mktemp("s") / "runs.duckdb"
    proc = cli(
        "run", str(kernels / "a.py"), str(kernels / "b.py"), "--problem", str(PROBLEM), "--mode", "test",
        "--device", "cpu", "--compile-timeout", "120", "--store", str(store), "--json",
    )  # fmt: skip
    return {"store": store, "proc": proc, "runs": json.loads(proc.stdout or "null")}


def test_several_files_with_a_problem_record_both_runs_under_the_problem(two_runs):
    proc = two_runs["proc"]
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in two_runs["runs"]] == ["passed", "passed"], two_runs["runs"]
    # the problem's own suites: the smoke suite without a GPU, its first test alone
    assert recorded(two_runs["store"]) == [
        ("a", "vectoradd", "smoke", "test", "passed", None),
        ("b", "vectoradd", "smoke", "test", "passed", None),
    ]
    # the notice is said once, and names the problem's full suite
    notices = [line for line in proc.stderr.splitlines() if line.startswith("no GPU")]
    assert notices == ["no GPU: running the CPU smoke suite (--suite vectoradd to insist)"], proc.stderr


def test_a_problem_through_the_queue_keeps_its_suite_and_parent(two_runs, kernels):
    store = two_runs["store"]
    parent = two_runs["runs"][0]["run_id"]
    proc = cli(
        "run", str(kernels / "a.py"), "--problem", str(PROBLEM), "--suite", "vectoradd", "--mode", "test",
        "--cases", "1", "--gpus", "1", "--device", "cpu", "--parent", parent[:8], "--quiet", "--store", str(store),
        "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["status"] == "passed", run
    with duckdb.connect(str(store), read_only=True) as con:
        got = con.execute("SELECT problem, suite, parent_run FROM runs WHERE run_id = ?", [run["run_id"]]).fetchone()
    assert got == ("vectoradd", "vectoradd", parent)


def _fields(reqs: list) -> list[dict]:
    """What a request asks for, but for the file it runs and its name."""
    return [{k: v for k, v in dataclasses.asdict(r).items() if k not in ("path", "name")} for r in reqs]


def test_the_same_options_through_each_route_give_the_same_requests(kernels, tmp_path):
    store = tmp_path / "s.duckdb"
    a, b = str(kernels / "a.py"), str(kernels / "b.py")
    opts = ["--problem", str(PROBLEM), "--suite", "vectoradd", "--mode", "test", "--cases", "1", "--seed", "5",
            "--timeout", "30", "--family", "f", "--note", "n", "--device", "cpu", "--store", str(store)]  # fmt: skip

    def cli_route(*words: str) -> list:
        return run_requests(build_parser().parse_args(["run", *words, *opts]))

    one = cli_route(a)
    routes = {
        "many": cli_route(a, b),
        "folder": cli_route(str(kernels)),
        "glob": cli_route("--glob", str(kernels / "*.py")),
        "queue": cli_route(a, b, "--gpus", "1"),
    }
    mcp_opts = {"problem": str(PROBLEM), "suite": "vectoradd", "mode": "test", "cases": "1", "seed": 5,
                "timeout": 30, "family": "f", "note": "n", "device": "cpu", "quiet": True}  # fmt: skip
    routes["mcp"] = run_requests(Tools(str(store)).args("run", [a, b], **mcp_opts))
    job = jobs.start_job(
        store, "a.py", kernels_dir=kernels, problem="vectoradd", problems_dir=PROBLEM.parent, suite="vectoradd",
        mode="test", cases=[1], seed=5, timeout=30, family="f", note="n", device="cpu",
    )  # fmt: skip
    try:
        assert job.spec["argv"][1:3] == ["-m", "tracker.capture.job"]  # the capture layer's program, not the CLI
        dashboard = [RunRequest(**job.spec["request"])]  # the request the job's process runs
    finally:
        assert jobs.wait(job, timeout=120)["status"] == "passed"
    assert one[0].problem == str(PROBLEM) and one[0].suite == "vectoradd" and one[0].timeout == 30
    for route, reqs in routes.items():
        assert [Path(r.path).name for r in reqs] == ["a.py", "b.py"], route
        assert _fields(reqs) == _fields(one) * 2, route
    # the dashboard's run adds only what marks it as the dashboard's: its trigger
    assert [{**f, "trigger": "cli"} for f in _fields(dashboard)] == _fields(one)
    assert dashboard[0].trigger == "ui"
    assert recorded(store) == [("a", "vectoradd", "vectoradd", "test", "passed", None)]
