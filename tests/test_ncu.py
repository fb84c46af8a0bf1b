"""`run --ncu`: the report's table built from plain data, the profiling pass's process control (with a stand-in
for the ncu executable and its report interface, which CI does not have), the run without ncu, and the profile
through the store, export, import, `show` and its --json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import ROOT, make_record

from tracker.capture import compile_cache, ncu, ncu_pass, runner, sandbox
from tracker.cli.main import main
from tracker.store import Store, transfer

SECTIONS_METRICS = {
    "gpu__time_duration.sum": 12_500.0,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 41.5,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 63.25,
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": 22.0,
    "launch__registers_per_thread": 72.0,
    "launch__shared_mem_per_block_static": 16384.0,
    "launch__shared_mem_per_block_dynamic": 0.0,
    "launch__block_size": 256.0,
    "launch__grid_size": 1320.0,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 7.5,
    "smsp__average_warps_issue_stalled_long_scoreboard_not_issued_per_issue_active.ratio": 99.0,
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 3.25,
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 1.5,
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": 0.5,
    "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio": 0.0,
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 9.0,  # the issue itself: no stall
    "smsp__pcsamp_warps_issue_stalled_selected": 500.0,  # another family: not mixed with the one above
}


def test_kernel_rows_build_the_table_from_plain_report_data():
    rows = ncu.kernel_rows(
        [
            {"name": "panel_kernel", "metrics": SECTIONS_METRICS},
            {
                "name": "tiny",
                "metrics": {
                    "gpu__time_duration.sum": 2_000.0,
                    "launch__block_size": 32.0,
                    "smsp__pcsamp_warps_issue_stalled_wait": 4.0,
                },
            },  # fmt: skip
        ]
    )
    first, second = rows
    assert first["kernel_idx"] == 0 and first["kernel"] == "panel_kernel"
    assert first["duration_us"] == pytest.approx(12.5)  # ncu's gpu__time_duration is in ns
    assert (first["occupancy_pct"], first["sm_pct"], first["memory_pct"]) == (41.5, 63.25, 22.0)
    assert (first["registers"], first["static_smem_bytes"], first["dynamic_smem_bytes"]) == (72, 16384, 0)
    assert isinstance(first["registers"], int) and (first["block_size"], first["grid_size"]) == (256, 1320)
    # The top three of the first family present, the most cycles first; _not_issued, selected, zero and other
    # families out.
    assert json.loads(first["stalls"]) == {"long_scoreboard": 7.5, "barrier": 3.25, "wait": 1.5}
    assert list(json.loads(first["stalls"])) == ["long_scoreboard", "barrier", "wait"]
    # What a report lacks stays empty; the sampled family counts when it is the only one.
    assert second["kernel_idx"] == 1 and second["duration_us"] == pytest.approx(2.0)
    assert second["occupancy_pct"] is None and second["registers"] is None and second["block_size"] == 32
    assert json.loads(second["stalls"]) == {"wait": 4.0}


# Stand-ins for what CI lacks: an `ncu` that writes the report its -o names (our JSON, not NVIDIA's format) after
# reading the job the runner sends its program, and an ncu_report module that reads that JSON through the calls
# the real interface has (load_report, num_ranges, range_by_idx, num_actions, action_by_idx, name, metric_names,
# metric_by_name, as_double).
FAKE_NCU = """#!PYTHON -I
import json, os, re, subprocess, sys, time
args = sys.argv[1:]
out = args[args.index("-o") + 1]
target = args[args.index("-o") + 2:]  # what ncu starts: the tracker's program (under the sandbox's filter)
job = json.loads(sys.stdin.read() or "null")
time.sleep(float(os.environ.get("NCU_SLEEP", "0")))
if os.environ.get("NCU_PLANT"):  # what a profiled kernel could do in its folder: a link where a log might be
    if os.path.lexists("ncu.log"):
        os.remove("ncu.log")
    os.symlink(os.environ["NCU_PLANT"], "ncu.log")
    print("import os  # planted", flush=True)
# the seccomp state of ncu and of its target: the target's launcher, as given, starts a line of Python instead
status = "import re; print(re.search(r'Seccomp:.*', open('/proc/self/status').read()).group())"
mine = re.search(r"Seccomp:.*", open("/proc/self/status").read()).group()
theirs = subprocess.run([*target[:-2], "-c", status], capture_output=True, text=True).stdout.strip()
with open(out + ".ncu-rep", "w") as f:
    json.dump({"job": job, "ncu": mine, "target": theirs, "target_argv": target,
               "kernels": [{"name": "k", "metrics": {"gpu__time_duration.sum": 3000.0}}]}, f)
""".replace("PYTHON", sys.executable)
FAKE_REPORT_MODULE = """
import json

class _Metric:
    def __init__(self, value): self.value = value
    def as_double(self): return self.value

class _Action:
    def __init__(self, data): self.data = data
    def name(self): return self.data["name"]
    def metric_names(self): return list(self.data["metrics"])
    def metric_by_name(self, name):
        return _Metric(self.data["metrics"][name]) if name in self.data["metrics"] else None

class _Range:
    def __init__(self, kernels): self.kernels = kernels
    def num_actions(self): return len(self.kernels)
    def action_by_idx(self, i): return _Action(self.kernels[i])

class _Context:
    def __init__(self, data): self.data = data
    def num_ranges(self): return 1
    def range_by_idx(self, i): return _Range(self.data["kernels"])

def load_report(path):
    with open(path) as f:
        return _Context(json.load(f))
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch) -> Path:
    tool = tmp_path / "nsight"
    (tool / "extras" / "python").mkdir(parents=True)
    (tool / "extras" / "python" / "ncu_report.py").write_text(FAKE_REPORT_MODULE)
    exe = tool / "ncu"
    exe.write_text(FAKE_NCU)
    exe.chmod(0o755)
    monkeypatch.setenv(ncu_pass.NCU_ENV, str(exe))
    return exe


def _sandboxed(tmp_path):
    """The runner's own command for the pass: in bubblewrap where it works here, as every run's worker."""
    req = runner.RunRequest(path=str(ROOT / "kernels" / "geqrf_reference.py"), store=str(tmp_path / "s.duckdb"))

    def command(front, argv, workdir):
        cache = compile_cache.bind("0" * 64, enabled=False)
        return runner._worker_command(req, workdir, None, "KERNELBEAM_RUN_TOKEN=test", cache, argv, (), front)

    return command


def test_the_pass_runs_ncu_per_case_in_the_sandbox_and_keeps_each_report(tmp_path, fake_ncu):
    final = tmp_path / "s.duckdb.traces" / "run1"
    job = {"variant_path": "/k.py", "problem": None, "suite": "smoke", "mode": "benchmark", "seed": 7}
    result = ncu_pass.profile_cases(job, [0, 3], 60.0, final, _sandboxed(tmp_path))
    assert result.notes == []
    assert [(c["case_idx"], c["report"], c["kernels"], c["error"]) for c in result.cases] == [
        (0, "ncu-case0.ncu-rep", 1, None),
        (3, "ncu-case3.ncu-rep", 1, None),
    ]
    assert [(k["case_idx"], k["kernel"], k["duration_us"]) for k in result.kernels] == [(0, "k", 3.0), (3, "k", 3.0)]
    kept = json.loads((final / "ncu-case3.ncu-rep").read_text())
    assert kept["job"] == {**job, "case_idx": 3}  # each process is told its case on stdin
    assert kept["target_argv"][-2:] == ["-m", "tracker.capture.ncu_calls"]
    if sandbox.unavailable() is None:
        # ncu's front end hung under the socket filter (it connects to its target): it runs above the filter, the
        # program it profiles (the kernel's process) under it
        assert (kept["ncu"], kept["target"]) == ("Seccomp:\t0", "Seccomp:\t2"), kept
    assert sorted(p.name for p in final.iterdir()) == ["ncu-case0.ncu-rep", "ncu-case3.ncu-rep"]


def test_the_pass_stops_at_the_runs_timeout_and_says_so(tmp_path, fake_ncu, monkeypatch):
    monkeypatch.setenv("NCU_SLEEP", "30")
    monkeypatch.setenv("KERNELBEAM_WORKER_ENV", "NCU_SLEEP")  # the sandbox passes only named variables
    monkeypatch.setattr(ncu_pass, "MIN_BUDGET_S", 0.5)
    start = time.monotonic()
    result = ncu_pass.profile_cases({}, [1, 2], 2.0, tmp_path / "final", _sandboxed(tmp_path))
    assert time.monotonic() - start < 15
    assert [(c["case_idx"], c["report"], c["error"]) for c in result.cases] == [
        (1, None, "stopped at the run's --timeout")
    ]
    assert result.notes[0].startswith("Nsight Compute profile stopped at the run's --timeout in case 1: 0 of 2")
    assert not (tmp_path / "final").exists()
    # Too little left before it starts: nothing is started at all.
    none = ncu_pass.profile_cases({}, [1], 0.1, tmp_path / "final", _sandboxed(tmp_path))
    assert none.cases == [] and "used up the run's --timeout" in none.notes[0]


def test_a_link_the_profiled_process_leaves_in_its_folder_takes_no_later_output(tmp_path, fake_ncu, monkeypatch):
    """Every case's ncu process appends to the pass's log: it is kept where the sandboxed process cannot swap it
    for a link (one to a .pth in site-packages would run in every later Python process)."""
    target = tmp_path / "outside" / "planted.pth"
    target.parent.mkdir()
    monkeypatch.setenv("NCU_PLANT", str(target))
    monkeypatch.setenv("KERNELBEAM_WORKER_ENV", "NCU_PLANT")
    result = ncu_pass.profile_cases({}, [0, 1, 2], 60.0, tmp_path / "final", _sandboxed(tmp_path))
    assert [c["error"] for c in result.cases] == [None, None, None]
    assert not target.exists()


def test_what_stops_a_profile_is_named(tmp_path, monkeypatch, fake_ncu):
    assert ncu_pass.unavailable("cuda") is None
    assert "not on a GPU" in ncu_pass.unavailable("cpu")
    # In the sandbox ncu runs above the kernel unfiltered: only where the kernel cannot open its memory (Yama).
    scope = tmp_path / "ptrace_scope"
    for text, protected in (("1\n", True), ("3\n", True), ("0\n", False), ("", False)):
        scope.write_text(text)
        assert sandbox.ancestors_protected(scope) is protected
    assert not sandbox.ancestors_protected(tmp_path / "no-yama")
    why = ncu_pass.unavailable("cuda", sandboxed=True)
    if sandbox.ancestors_protected():
        assert why is None
    else:
        assert "ptrace_scope" in why and "--no-sandbox" in why, why
    assert ncu_pass.unavailable("cuda", sandboxed=False) is None
    (fake_ncu.parent / "extras" / "python" / "ncu_report.py").unlink()
    assert "no Python report interface" in ncu_pass.unavailable("cuda")
    monkeypatch.setenv(ncu_pass.NCU_ENV, str(tmp_path / "nowhere" / "ncu"))
    assert "KERNELBEAM_NCU is not an executable" in ncu_pass.unavailable("cuda")


@pytest.mark.skipif(any(Path(p).exists() for p in ncu_pass.KNOWN_NCU), reason="ncu is installed here")
def test_a_run_without_ncu_says_so_and_goes_on(tmp_path):
    store = tmp_path / "s.duckdb"
    env = {k: v for k, v in os.environ.items() if k != ncu_pass.NCU_ENV}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])  # no ncu on it
    done = subprocess.run(
        [sys.executable, "-m", "tracker", "run", str(ROOT / "kernels" / "geqrf_reference.py"), "--suite", "smoke",
         "--mode", "test", "--cases", "0", "--ncu", "--store", str(store), "--json", "--quiet"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "passed"
    assert "ncu: no Nsight Compute profile: ncu is not installed here" in done.stderr
    assert "no Nsight Compute profile: ncu is not installed here" in summary["warnings"]
    found = Store(store).ncu_profile(summary["run_id"])
    assert found["cases"].empty and found["kernels"].empty


def _profiled_record(run_id: str):
    started = datetime(2026, 12, 1, 12, tzinfo=UTC)
    source = "def custom_kernel(d):\n    return d\n"
    rec = make_record(run_id, variant="fused", source=source, path="kernels/f.py", family=None, started=started,
                      means=[100.0 + i for i in range(12)])  # fmt: skip
    rows = ncu.kernel_rows([{"name": "void fused_wy_kernel<64>(float*)", "metrics": SECTIONS_METRICS}])
    rec.ncu_cases = [
        {"case_idx": 0, "report": "ncu-case0.ncu-rep", "kernels": 1, "error": None},
        {"case_idx": 3, "report": None, "kernels": 0, "error": "ncu wrote no report (exit 1): ==ERROR== ..."},
    ]
    rec.ncu_kernels = [{"case_idx": 0, **r} for r in rows]
    return rec


def test_the_profile_goes_through_the_store_export_import_and_show(tmp_path, capsys):
    src, dst = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    assert Store(src).finish_run(_profiled_record("ncurun00001")) is None
    report = Store(src).traces_dir("ncurun00001") / "ncu-case0.ncu-rep"
    report.parent.mkdir(parents=True)
    report.write_bytes(b"NVIDIA report bytes\x00\x01")
    assert transfer.export_runs(src, tmp_path / "out", ["ncurun00001"]) == 1
    assert (tmp_path / "out" / "ncu" / "ncurun00001" / "ncu-case0.ncu-rep").read_bytes() == report.read_bytes()
    assert transfer.import_runs(dst, tmp_path / "out") == 1
    moved = Store(dst).traces_dir("ncurun00001") / "ncu-case0.ncu-rep"
    assert moved.read_bytes() == report.read_bytes()

    assert main(["show", "ncurun00001", "--store", str(dst), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["ncu"]
    assert doc["profiled"] and [c["report_path"] for c in doc["cases"]] == [str(moved), None]
    (kernel,) = doc["kernels"]
    assert kernel["kernel"] == "void fused_wy_kernel<64>(float*)" and kernel["registers"] == 72
    assert kernel["stalls"] == {"long_scoreboard": 7.5, "barrier": 3.25, "wait": 1.5}

    assert main(["show", "ncurun00001", "--store", str(dst)]) == 0
    text = capsys.readouterr().out
    assert f"case 0: 1 kernel(s), report {moved}" in text
    assert "case 3: 0 kernel(s); error: ncu wrote no report (exit 1)" in text
    line = (
        "  #0 fused_wy_kernel: 12.50 us, occupancy 41.5%, SM 63.2%, memory 22.0%, 72 regs/thread, "
        "smem 16384+0 B/block, block 256, grid 1320; stalls: long_scoreboard 7.5, barrier 3.2, wait 1.5"
    )
    assert line in text.splitlines()
    moved.unlink()  # a report that did not come along (too large to move, say) is named, not pointed to
    assert main(["show", "ncurun00001", "--store", str(dst)]) == 0
    assert "case 0: 1 kernel(s), report ncu-case0.ncu-rep not beside this store" in capsys.readouterr().out


def test_import_refuses_a_report_name_that_is_a_path(tmp_path):
    src = tmp_path / "a.duckdb"
    rec = _profiled_record("ncurun00002")
    rec.ncu_cases[0]["report"] = "../../etc/passwd"
    assert Store(src).finish_run(rec) is None
    transfer.export_runs(src, tmp_path / "out", ["ncurun00002"])
    with pytest.raises(ValueError, match="column report has the invalid value '../../etc/passwd'"):
        transfer.import_runs(tmp_path / "b.duckdb", tmp_path / "out")


def test_the_run_page_shows_the_profile(tmp_path, monkeypatch):
    from conftest import open_page

    store = tmp_path / "page.duckdb"
    assert Store(store).finish_run(_profiled_record("ncurun00003")) is None
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/run.py", id="ncurun00003")
    assert not at.error
    table = next(df.value for df in at.dataframe if "top stalls (cycles per issue)" in df.value.columns)
    assert table.iloc[0]["kernel"] == "fused_wy_kernel" and table.iloc[0]["regs/thread"] == 72  # short, and whole:
    assert table.iloc[0]["full name"] == "void fused_wy_kernel<64>(float*)"
    assert table.iloc[0]["top stalls (cycles per issue)"] == "long_scoreboard 7.5, barrier 3.2, wait 1.5"
    assert table.iloc[0]["smem/block (B)"] == 16384 and table.iloc[0]["duration (µs)"] == pytest.approx(12.5)
    captions = " ".join(c.value for c in at.caption)
    # the record names a report whose file is not here (as with the shipped samples/): named, not pointed to
    assert "ncu-case0.ncu-rep` not beside this store" in captions and "case 3: no report" in captions
    report = Store(store).traces_dir("ncurun00003") / "ncu-case0.ncu-rep"
    report.parent.mkdir(parents=True)
    report.write_bytes(b"NVIDIA report bytes")
    at = open_page("pages/run.py", id="ncurun00003")
    captions = " ".join(c.value for c in at.caption)
    assert f"report `{report}`" in captions and "not beside" not in captions


@pytest.mark.skipif(any(Path(p).exists() for p in ncu_pass.KNOWN_NCU), reason="ncu is installed here")
def test_the_benchmark_checkbox_asks_for_ncu(own_demo_store, monkeypatch):
    from conftest import open_page

    from tracker.capture import jobs

    path, _ = own_demo_store
    monkeypatch.delenv(ncu_pass.NCU_ENV, raising=False)
    at = open_page("pages/benchmark.py")
    at.selectbox(key="bm_kernel").select("geqrf_reference.py")
    at.selectbox(key="bm_mode").select("test")
    at.multiselect(key="bm_cases").select(0)
    at.checkbox(key="bm_ncu").check()
    at.button(key="bm_start").click().run()
    assert not at.error and "Started job" in " ".join(s.value for s in at.success)
    (job,) = jobs.list_jobs(path)
    assert job.spec["request"]["ncu"] is True and job.spec["ncu"] is True
    final = jobs.wait(job, timeout=120)
    assert final["status"] == "passed", jobs.log_tail(job)
    assert "no Nsight Compute profile" in Store(path).get_run(final["run_id"])["warnings"]
