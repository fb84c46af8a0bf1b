"""The dashboard's views from the command line (issue 21), through real `python -m tracker` processes on the demo
store: the same default context as the pages."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_leaderboard_defaults_to_the_context_that_passed_last(demo_store):
    """No --suite or --gpu on a store with H200 and CPU runs: the CPU smoke runs (the newest), as on the page; a
    given --gpu keeps its own suite; a GPU without runs is an error naming the GPUs there are."""
    path, ids = demo_store
    doc = json.loads(cli("leaderboard", "--json", "--store", str(path)).stdout)
    assert (doc["gpu"], doc["suite"]) == ("CPU", "smoke") and [v["best_run"] for v in doc["variants"]] == [ids["cpu"]]
    doc = json.loads(cli("leaderboard", "--gpu", "NVIDIA H200", "--json", "--store", str(path)).stdout)
    assert doc["suite"] == "qr_v2" and len(doc["variants"]) >= 2
    bad = cli("leaderboard", "--gpu", "NVIDIA B200", "--store", str(path))
    assert bad.returncode == 2 and "NVIDIA H200" in bad.stderr and "Traceback" not in bad.stderr


def test_store_before_the_command_version_and_list_filters(demo_store):
    """`--store` before the command, `--version`, and `list --family/--status/--variant/--since` (newest first)."""
    path, ids = demo_store

    def listed(*args: str) -> list[str]:
        proc = cli(*args, "--json")
        assert proc.returncode == 0, proc.stderr
        return [r["run_id"] for r in json.loads(proc.stdout)]

    assert listed("--store", str(path), "list", "--family", "wy") == ids["wy"][::-1]
    assert listed("list", "--since", "2026-03-01T21:30:00+00:00", "--status", "passed", "--store", str(path)) == [
        ids["cpu"], ids["wy"][1]]  # fmt: skip
    assert listed("list", "--variant", "wy_v1", "--store", str(path)) == [ids["wy"][1]]
    variants = {v["variant"]: v for v in json.loads(cli("variants", "--store", str(path), "--json").stdout)}
    assert variants["householder_v1"]["parent_variant"] == "householder_v0"  # from its run's parent, as on Lineage
    shown = cli("show", ids["profiled"], "--store", str(path)).stdout
    top = shown[shown.index("profile: top kernels") :].splitlines()
    assert top[1].split()[:5] == ["kernel", "calls", "device", "(ms)", "self"]
    assert top[2].split()[:2] == ["householder_panel_kernel", "96"]  # 8 calls x 12 cases, the most device time
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.split()[-1][0].isdigit()


def test_the_shipped_problem_folder_runs_as_the_readme_says(tmp_path):
    """problems/vectoradd (ours, GPU Mode's layout): its submission passes all four tests on the CPU."""
    store = tmp_path / "va.duckdb"
    proc = cli("run", "problems/vectoradd/submission.py", "--problem", "problems/vectoradd", "--suite", "vectoradd",
               "--mode", "test", "--device", "cpu", "--store", str(store), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "passed" and len(doc["cases"]) == 4 and all(c["passed"] for c in doc["cases"])
    assert json.loads(cli("list", "--store", str(store), "--json").stdout)[0]["problem"] == "vectoradd"
    header = next(line for line in cli("show", doc["run_id"], "--store", str(store)).stdout.splitlines()
                  if line.startswith("#  case"))  # fmt: skip
    assert header.split() == ["#", "case", "ok", "message"]  # a test run: no timing columns
