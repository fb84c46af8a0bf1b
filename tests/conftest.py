"""Stores for the dashboard tests, built only through the tracker's write path (store.finish_run / add_verdict)."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import configuration

from tracker import store as store_mod
from tracker.capture.sandbox import RUNS_ROOT_NAME
from tracker.common.gitinfo import source_hash
from tracker.store import Store
from tracker.workloads.qr_v2.suites import QR_V2, SMOKE

ROOT = Path(__file__).resolve().parent.parent
# Hypothesis keeps its caches (unicode data, constants) in ./.hypothesis by default: in the temp folder instead,
# so a test run writes nothing into the checkout.
configuration.set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "kernelbeam-hypothesis")
# Settings the test kernels in tests/variants read: the sandbox passes a kernel only the variables named here.
os.environ.setdefault("KERNELBEAM_WORKER_ENV", "KB_IMPORT_SLEEP,KB_CALL_SLEEP,KB_TEST_PIDS,KB_ENTERED,KB_GO,KB_MARK")
# The test kernels' marker children (`sleep 300.MARK`, which tests find by command line) carry this test process's
# pid: a parallel worker of this session, or another session's suite on the same machine, never sees ours.
os.environ["KB_MARK"] = str(os.getpid())
HANG_SLEEP = f"300.{os.environ['KB_MARK']}"  # tests/variants/hangs_second.py's child: `sleep HANG_SLEEP`
# The tests' own side-file key, lock and state folders, never this user's or this machine's (one per test session,
# shared with the trackers and clusters they start; each test gets its own lock and state folder on top).
_SESSION = Path(tempfile.mkdtemp(prefix="kb-tests-"))
os.environ["KERNELBEAM_KEY_FILE"] = str(_SESSION / "side-file.key")
os.environ["KERNELBEAM_LOCK_DIR"] = str(_SESSION / "locks")
os.environ["XDG_STATE_HOME"] = str(_SESSION / "state")
os.environ["KERNELBEAM_COMPILE_CACHE"] = str(_SESSION / "compile")  # never this user's compile caches


def _read_streamlit_config_from_the_checkout() -> None:
    """Streamlit reads .streamlit/config.toml from the working folder once per process and keeps it: read it from
    the checkout now, so a test that changes folder first cannot leave every later AppTest without it (no
    server.address: 'every address', and the token gate)."""
    from streamlit import config

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        config.get_config_options(force_reparse=True)
    finally:
        os.chdir(here)


_read_streamlit_config_from_the_checkout()


@pytest.fixture(scope="session", autouse=True)
def own_lock_and_state_folders_for_the_session(tmp_path_factory):
    """The same for module and session fixtures, which run before any test's own folders are set."""
    patch = pytest.MonkeyPatch()
    patch.setenv("KERNELBEAM_LOCK_DIR", str(tmp_path_factory.mktemp("session-locks")))
    patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("session-state")))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def own_lock_and_state_folders(tmp_path_factory, monkeypatch):
    """Every test its own device-lock folder and state folder (fallback side files), never this machine's: a
    tracker run going on elsewhere never makes a test wait, and no test leaves a run where users look. A test
    that needs a shared folder sets its own."""
    monkeypatch.setenv("KERNELBEAM_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


def tracker_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m tracker ARGS` from the checkout, as a user types it."""
    return subprocess.run([sys.executable, "-m", "tracker", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def tracker_json(*args: str, timeout: float = 300):
    """`python -m tracker ARGS --json`, which must succeed: its document."""
    proc = tracker_cli(*args, "--json", timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now: a fixed one could be taken by another test run on the same machine."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_processes(*argv: str, any_program: bool = False) -> list[int]:
    """Pids of this host's live processes whose command line is exactly `argv` (with any_program, whatever runs
    the rest: the sandbox may start the interpreter under its resolved path). A sandboxed kernel's children
    have pids of the sandbox's own namespace, so tests find them by what they run."""
    want = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            line = (entry / "cmdline").read_bytes()
            same = line.partition(b"\0")[2] == want if any_program else line == want
            if same and state not in "ZX":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def wait_process(*argv: str, seconds: float = 90.0, any_program: bool = False) -> list[int]:
    """Wait until a process runs `argv` (a kernel's marker child: the kernel is inside that call); its pids."""
    deadline = time.monotonic() + seconds
    while not (found := host_processes(*argv, any_program=any_program)):
        assert time.monotonic() < deadline, f"no process {' '.join(argv)} within {seconds} s"
        time.sleep(0.1)
    return found


def wait_no_process(*argv: str, seconds: float = 10.0, any_program: bool = False) -> list[int]:
    """Wait until no process runs `argv`; returns those still running after `seconds`."""
    deadline = time.monotonic() + seconds
    while (left := host_processes(*argv, any_program=any_program)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


H200 = "NVIDIA H200"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
# Base mean times (µs) of the 12 qr_v2 benchmark cases on the synthetic GPU.
BASE_US = [18.0, 95.0, 240.0, 2100.0, 3900.0, 1600.0, 5200.0, 2300.0, 4100.0, 2050.0, 1990.0, 3800.0]
REGRESSED_CASE = 3  # "640x512 c2 dense" gets 1.5x slower from the 6th householder run on
SAMPLES = 20


def leftover_run_folders(tmpdir: Path) -> list[Path]:
    """Run folders the tracker left in `tmpdir` (its TMPDIR): any in the runs root (tracker.capture.sandbox, which
    stays, empty, between runs) and any other kernelbeam-* folder."""
    root = tmpdir / RUNS_ROOT_NAME
    return [p for p in tmpdir.glob("kernelbeam-*") if p != root] + (list(root.iterdir()) if root.is_dir() else [])


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def make_record(
    run_id: str,
    *,
    variant: str,
    source: str,
    path: str,
    family: str | None,
    started: datetime,
    means: list[float] | None,
    suite: str = "qr_v2",
    mode: str = "benchmark",
    gpu: str = H200,
    status: str = "passed",
    failed_cases: tuple[int, ...] = (),
    commit: str | None = None,
    note: str | None = None,
    parent: str | None = None,
    error: str | None = None,
    seed: int = 0,
    profile: bool = False,
) -> store_mod.RunRecord:
    """A complete run as the runner would hold it in memory before its one write."""
    cases = QR_V2.benchmarks if suite == "qr_v2" else SMOKE.benchmarks
    rng = np.random.default_rng(seed)
    sha = source_hash(source)
    rec_cases, samples = [], []
    for i, case in enumerate(cases):
        passed = i not in failed_cases and status != "timeout"
        row = {
            "case_idx": i, "spec": case.spec, "kind": "benchmark", "batch": case.batch, "n": case.n,
            "cond": case.cond, "seed": case.seed, "case_name": case.case, "inputs": case.input_count(),
            "passed": passed, "message": "" if passed else "factorization residual 3.1e+02 > 20",
            "factor_res": 0.21 + 0.01 * i, "tril_res": 0.15, "recon_res": 0.11, "orth_res": 0.8 + 0.01 * i,
        }  # fmt: skip
        if means is not None and passed:
            x = means[i] * (1 + 0.01 * rng.standard_normal(SAMPLES))
            row.update(
                runs=SAMPLES, mean_us=float(x.mean()), std_us=float(x.std(ddof=1)),
                err_us=float(x.std(ddof=1) / math.sqrt(SAMPLES)), best_us=float(x.min()), worst_us=float(x.max()),
            )  # fmt: skip
            samples += [(i, rep, float(t)) for rep, t in enumerate(x)]
        rec_cases.append(row)
    timed = [c["mean_us"] for c in rec_cases if c.get("mean_us")]
    geomean = (
        math.exp(sum(map(math.log, timed)) / len(timed)) if status == "passed" and len(timed) == len(cases) else None
    )
    run = {
        "run_id": run_id, "variant_sha256": sha, "variant": variant, "path": path, "family": family,
        "parent_run": parent, "note": note, "status": status, "suite": suite, "mode": mode, "seed": None,
        "started_at": started, "finished_at": started + timedelta(minutes=2), "host": "h200-box", "pid": 4242,
        "device": "cpu" if gpu == "CPU" else "cuda", "gpu": gpu, "sm_count": None if gpu == "CPU" else 132,
        "driver": None if gpu == "CPU" else "570.124", "cuda": None if gpu == "CPU" else "12.8",
        "torch": "2.11.0", "triton": "3.6.0", "python": "3.12.3",
        "git_repo": str(ROOT) if commit else None, "git_commit": commit, "git_branch": "main" if commit else None,
        "git_dirty": False if commit else None, "git_diff": "" if commit else None, "trigger": "cli",
        "error": error, "log_tail": "", "warnings": None, "geomean_us": geomean,
    }  # fmt: skip
    prof_cases, prof_kernels = [], []
    if profile:
        for i in range(len(cases)):
            prof_cases.append({"case_idx": i, "launches": 40 + i, "host_us": 120.0 + i, "device_us": 900.0 + i})
            prof_kernels += [
                {"case_idx": i, "kernel": "householder_panel_kernel", "calls": 8, "device_us": 600.0, "self_us": 600.0},
                {"case_idx": i, "kernel": "trailing_update_gemm", "calls": 8, "device_us": 250.0, "self_us": 250.0},
            ]
    variant_row = {"sha256": sha, "name": variant, "path": path, "source": source, "first_seen": started}
    return store_mod.RunRecord(store_mod.RunRow(**run), variant_row, rec_cases, samples, prof_cases, prof_kernels)


def kernel_source(name: str, version: int) -> str:
    lines = [
        "from task import input_t, output_t",
        f'"""{name} v{version}: Householder QR. Parent: v{version - 1}."""',
        "import torch",
        "",
        f"BLOCK = {16 * (1 + version % 3)}",
        "",
        "def custom_kernel(data: input_t) -> output_t:",
        "    a = data.clone()",
    ]
    lines += [f"    # step {k}: tuned in v{version}" for k in range(version % 4)]
    lines += ["    return torch.geqrf(a)", ""]
    return "\n".join(lines)


def build_demo_store(path: Path) -> dict:
    """Ten householder runs (a 1.5x regression of one case at the sixth, and a timeout), three wy runs (one
    failed), and a CPU smoke run; a verdict; profile rows. Returns the run ids the tests look at."""
    commits = [c for c in (_git("rev-parse", "HEAD~2"), _git("rev-parse", "HEAD")) if c]
    old_commit, new_commit = (commits + [None, None])[:2] if len(commits) == 2 else (None, None)
    ids: dict = {"householder": [], "wy": []}
    records = []
    for k in range(10):
        factor = [1.0] * 12
        if k >= 5:
            factor[REGRESSED_CASE] = 1.5
        status = "timeout" if k == 7 else "passed"
        run_id = f"hh{k:02d}aaaaaaaa"
        ids["householder"].append(run_id)
        records.append(
            make_record(
                run_id, variant=f"householder_v{k}", source=kernel_source("householder", k),
                path="kernels/householder_torch.py", family="householder", started=T0 + timedelta(hours=k),
                means=[b * f for b, f in zip(BASE_US, factor, strict=True)] if status == "passed" else None,
                status=status, error="the run exceeded its timeout of 900 s" if status == "timeout" else None,
                commit=old_commit if k < 5 else new_commit, seed=k, profile=(k == 4),
                note=f"hypothesis {k}: O'Brien's \"blocked\" trick" if k == 4 else None,
                parent=ids["householder"][k - 1] if k else None,
            )
        )  # fmt: skip
    for k in range(3):
        run_id = f"wy{k:02d}bbbbbbbb"
        ids["wy"].append(run_id)
        failed = k == 2
        records.append(
            make_record(
                run_id, variant=f"wy_v{k}", source=kernel_source("wy", k + 10), path="kernels/blocked_wy_torch.py",
                family="wy", started=T0 + timedelta(hours=12 + k), means=[b * 0.8 for b in BASE_US],
                status="failed" if failed else "passed", failed_cases=(4,) if failed else (),
                error="1 case(s) failed: 60x1024 c2 s75342 dense" if failed else None, commit=new_commit, seed=20 + k,
            )
        )  # fmt: skip
    records.append(
        make_record(
            "cpu00ccccccc", variant="geqrf_reference", source=kernel_source("geqrf", 1),
            path="kernels/geqrf_reference.py", family=None, started=T0 + timedelta(hours=20), suite="smoke",
            gpu="CPU", means=[60.0, 290.0, 280.0, 150.0], commit=new_commit, seed=99,
        )
    )  # fmt: skip
    for rec in records:
        assert Store(path).finish_run(rec) is None
    Store(path).add_verdict(ids["wy"][1], "promoted", "faster on every shape")
    ids.update(
        regressed=ids["householder"][5], before_regression=ids["householder"][4], timeout=ids["householder"][7],
        cpu="cpu00ccccccc", profiled=ids["householder"][4], commits=(old_commit, new_commit),
    )  # fmt: skip
    return ids


def old_store(path: Path, version: int, source: Path) -> Path:
    """A store as the tracker at schema `version` left it (its migrations only), holding `source`'s rows in the
    columns that version had: tables and columns that later migrations brought are not there."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
        for v in range(version):
            con.execute(store_mod.MIGRATIONS[v])
            con.execute("INSERT INTO schema_version VALUES (?, now())", [v + 1])
        con.execute(f"ATTACH '{source}' AS src (READ_ONLY)")
        for table in store_mod.TABLE_COLUMNS:
            cols = ", ".join(
                r[0]
                for r in con.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_catalog = current_database() "
                    "AND table_name = ? ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            )
            if cols:
                con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM src.{table}")
    return path


@pytest.fixture(scope="session")
def demo_store_master(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    return path, build_demo_store(path)


@pytest.fixture
def demo_store(demo_store_master, tmp_path, monkeypatch) -> tuple[Path, dict]:
    """A private copy of the demo store (tests may write to it), selected through KERNELBEAM_STORE."""
    master, ids = demo_store_master
    path = tmp_path / "store.duckdb"
    shutil.copy(master, path)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    return path, ids


@pytest.fixture
def own_demo_store(demo_store, monkeypatch) -> tuple[Path, dict]:
    """The demo store copy as the dashboard's own store: the one it may write verdicts and jobs into."""
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(demo_store[0]))
    return demo_store


@pytest.fixture
def empty_store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "empty.duckdb"
    with Store(path).connect():
        pass
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    return path


@pytest.fixture
def bad_store(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "notes.duckdb"
    path.write_text("this is a text file, not a DuckDB database\n" * 50)
    monkeypatch.setenv("KERNELBEAM_STORE", str(path))
    return path


def open_page(page: str | None = None, **params: str):
    """Render the dashboard (app.py) at a page with query parameters through AppTest; fails on any exception."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    if page is not None and page != "pages/experiments.py":
        at.run()
        at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_url(page: str, **params: str):
    """A page URL opened in a fresh tab: the first script run is the page's, with `params` as the URL it loads
    (open_page switches from the home page first, so bound widgets there keep the home page's values)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for key, value in params.items():
        at.query_params[key] = value
    # The page's first run runs app.py through runpy, which sets argv[0] to app.py: pytest's own arguments would
    # then read as the app's (a store named tests/...). A server has the app's arguments there.
    argv, sys.argv = sys.argv, [str(ROOT / "app.py")]
    try:
        at.run()
    finally:
        sys.argv = argv
    assert not at.exception, [e.value for e in at.exception]
    return at
