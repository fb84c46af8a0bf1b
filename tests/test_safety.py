"""Store safety and security: nothing from the store, an import or a URL reaches a command line as an option;
import refuses bad rows and changes nothing; the dashboard writes no store but its own; no run is lost when the
store and its side folder cannot be written; writers are not starved by readers; statuses shown are true."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from test_store import counts, held, make_run, run_ids

from tests.conftest import open_page
from tracker import store as store_mod
from tracker.capture import envinfo, jobs
from tracker.common.gitinfo import diff_commits, safe_repo_path
from tracker.store import Store
from tracker.store.sidefiles import save_side_file
from tracker.store.transfer import export_runs, import_runs
from tracker.store.validate import InvalidImport

pytestmark = pytest.mark.timeout(300)
APP = str(ROOT / "app.py")
PAGES = ["pages/experiments.py", "pages/run.py", "pages/compare.py", "pages/regressions.py", "pages/benchmark.py"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.delenv("KERNELBEAM_ADDRESS", raising=False)
    monkeypatch.delenv("KERNELBEAM_TOKEN", raising=False)
    envinfo.gpu_available.cache_clear()
    import streamlit as st

    st.cache_data.clear()


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A real git repository with two commits of one kernel file."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "t@example.com")
    git(path, "config", "user.name", "t")
    (path / "k.py").write_text("x = 1\n")
    git(path, "add", "k.py")
    git(path, "commit", "-qm", "one")
    (path / "k.py").write_text("x = 2\n")
    git(path, "commit", "-qam", "two")
    return path


def fingerprint(path: Path) -> tuple[int, int, str]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------------- 1. no value as an option


def test_a_commit_that_looks_like_an_option_never_reaches_git(tmp_path, repo, monkeypatch):
    """A store (written before import validated anything) holds `--output=FILE` as a commit: opening the
    Compare link must not create FILE, and import now refuses such a row."""
    target = tmp_path / "owned.txt"
    store = tmp_path / "s.duckdb"
    head = git(repo, "rev-parse", "HEAD")
    a, b = make_run("evil00000001"), make_run("good00000002", source="# other\n")
    a.run.update(git_commit=f"--output={target}", git_repo=str(repo), path=str(repo / "k.py"))
    b.run.update(git_commit=head, git_repo=str(repo), path=str(repo / "k.py"))
    for rec in (a, b):
        assert Store(store).finish_run(rec) is None
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    monkeypatch.chdir(repo)  # the page also tries the working directory's repository
    at = open_page("pages/compare.py", a="evil00000001", b="good00000002")
    assert not target.exists()
    assert "are not both in a repository here" in texts(at.info)
    assert diff_commits(repo, f"--output={target}", head) is None and not target.exists()
    # the same row is refused by import
    export_runs(store, tmp_path / "export", ["evil00000001"])
    with pytest.raises(InvalidImport, match="git_commit"):
        import_runs(tmp_path / "other.duckdb", tmp_path / "export")
    assert not (tmp_path / "other.duckdb").exists()


def test_commits_must_be_hex_names_the_repository_resolves(repo):
    first, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    assert "-x = 1" in diff_commits(repo, first, head) and "+x = 2" in diff_commits(repo, first[:8], head[:8])
    for bad in ("HEAD", "main", "--stat", "-p", "0" * 40, f"{head}^", "ab", first.upper()):
        assert diff_commits(repo, bad, head) is None, bad


def test_a_path_with_dotdot_or_outside_the_repository_is_refused(repo, tmp_path):
    first, head = git(repo, "rev-parse", "HEAD~1"), git(repo, "rev-parse", "HEAD")
    (tmp_path / "outside.py").write_text("secret\n")
    for bad in ("../outside.py", "sub/../../outside.py", str(tmp_path / "outside.py"), "--output=x", "-p"):
        assert safe_repo_path(repo, bad) is None, bad
        assert diff_commits(repo, first, head, [bad]) is None, bad
    assert safe_repo_path(repo, "k.py") == "k.py" and safe_repo_path(repo, str(repo / "k.py")) == "k.py"
    assert "+x = 2" in diff_commits(repo, first, head, [str(repo / "k.py")])


def test_option_looking_values_from_the_benchmark_form_are_recorded_verbatim(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(ROOT / "kernels" / "geqrf_reference.py", kernels / "-ref.py")  # even the file name
    store = tmp_path / "s.duckdb"
    note, family = "--help --store=/etc/passwd -x", "-f"
    job = jobs.start_job(
        store, "-ref.py", suite="smoke", mode="test", cases=[0], kernels_dir=kernels, note=note, family=family,
        device="cpu",
    )  # fmt: skip
    st = jobs.wait(job, timeout=240)
    assert st["state"] == "finished" and st["status"] == "passed", jobs.log_tail(job)
    run = Store(store).get_run(st["run_id"])
    assert run["note"] == note and run["family"] == family
    assert job.spec["request"]["note"] == note and job.spec["request"]["family"] == family


def _rewrite(folder: Path, table: str, column: str, value, type_=None) -> None:
    path = folder / f"{table}.parquet"
    data = pq.read_table(path)
    i = data.column_names.index(column)
    arr = pa.array([value] * data.num_rows, type=type_)
    pq.write_table(data.set_column(i, pa.field(column, arr.type), arr), path)


@pytest.fixture
def exported(tmp_path) -> tuple[Path, Path]:
    """An export folder of two runs, and a store with one run of its own (to see that nothing changes)."""
    source, folder, target = tmp_path / "src.duckdb", tmp_path / "export", tmp_path / "target.duckdb"
    for rec in (make_run("aaaa00000001"), make_run("aaaa00000002", source="# v2\n")):
        assert Store(source).finish_run(rec) is None
    export_runs(source, folder)
    assert Store(target).finish_run(make_run("mine00000001")) is None
    return folder, target


def _cli_import(folder: Path, store: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tracker", "import", str(folder), "--store", str(store)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "table, column, value, type_, message",
    [
        ("runs", "note", "50 MB", pa.large_string(), "note"),  # made in the test: a parameter would be its id
        ("runs", "pid", "1234", pa.string(), "column 'pid' has type string, expected INTEGER"),  # wrong type
        ("runs", "started_at", "2026-01-01", pa.string(), "started_at"),
        ("runs", "run_id", "../../etc", pa.string(), "run_id"),
        ("runs", "status", "running", pa.string(), "status"),
        ("runs", "suite", "--suite=x", pa.string(), "suite"),
        ("variants", "sha256", "abc", pa.string(), "sha256"),
        ("runs", "git_commit", "-p", pa.string(), "git_commit"),
    ],
    ids=[
        "50MB-note",
        "pid-as-text",
        "time-as-text",
        "run-id-path",
        "running",
        "suite-option",
        "bad-sha",
        "commit-option",
    ],
)
def test_import_refuses_a_bad_row_and_changes_nothing(exported, table, column, value, type_, message):
    folder, target = exported
    _rewrite(folder, table, column, "n" * 50_000_000 if value == "50 MB" else value, type_)
    before = fingerprint(target)
    proc = _cli_import(folder, target)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr[-2000:]
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert fingerprint(target) == before and run_ids(target) == {"mine00000001"}


def test_import_checks_every_folder_before_writing_any(exported, tmp_path):
    folder, target = exported
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    _rewrite(bad, "runs", "mode", "--mode", pa.string())
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "import", str(folder), str(bad), "--store", str(target)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "mode" in proc.stderr
    assert run_ids(target) == {"mine00000001"}
    assert _cli_import(folder, target).returncode == 0 and len(run_ids(target)) == 3


# ------------------------------------------------------------------------- 2. the dashboard writes nothing


def test_a_foreign_duckdb_file_is_refused_and_left_untouched(tmp_path, monkeypatch):
    other = tmp_path / "their.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE accounts (id INTEGER, name VARCHAR); INSERT INTO accounts VALUES (1, 'x')")
    con.close()
    before = fingerprint(other)
    monkeypatch.setenv("KERNELBEAM_STORE", str(other))
    for page in PAGES:
        at = open_page(page)
        assert "not a KernelBeam store" in texts(at.error), page
        assert "refused" in texts(at.sidebar.caption)
    assert fingerprint(other) == before
    assert sorted(os.listdir(tmp_path)) == sorted(["their.duckdb", "no-samples"])


def test_a_mistyped_store_path_is_not_created(tmp_path, monkeypatch):
    typo = tmp_path / "experiments.duckbd"
    monkeypatch.setenv("KERNELBEAM_STORE", str(typo))
    for page in PAGES:
        at = open_page(page)
        assert "There is no store" in texts(at.error), page
    assert not typo.exists() and not Path(f"{typo}.wal").exists()


def test_a_store_of_a_newer_schema_is_refused(demo_store, monkeypatch):
    path, _ = demo_store
    with Store(path).connect() as con:
        con.execute("INSERT INTO schema_version VALUES (999, now())")
    before = fingerprint(path)
    at = open_page()
    assert "newer than this dashboard" in texts(at.error)
    assert fingerprint(path) == before


def test_the_sidebar_names_the_open_store_and_its_runs(demo_store):
    path, _ = demo_store
    before = fingerprint(path)
    at = open_page()
    assert f"Open: `{path}` · 14 runs" in texts(at.sidebar.caption)
    assert fingerprint(path) == before


# --------------------------------------------------------------------------------------- 3. no run lost

WAITING_KERNEL = """
import os, time
from task import input_t, output_t
import torch


def custom_kernel(data: input_t) -> output_t:
    open(os.environ["KB_ENTERED"], "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["KB_GO"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return torch.geqrf(data)
"""


def test_a_run_whose_store_and_side_folder_vanish_mid_run_goes_to_the_fallback(tmp_path):
    """The store's folder is replaced by a plain file while the kernel runs: neither the store nor
    <store>.pending/ can be written (for root too). The run lands, whole, in $XDG_STATE_HOME/kernelbeam/pending/,
    the message names it, and --json carries the record; later it can be brought into the store."""
    folder = tmp_path / "d"
    folder.mkdir()
    store = folder / "s.duckdb"
    kernel = tmp_path / "waits.py"
    kernel.write_text(WAITING_KERNEL)
    entered, go = tmp_path / "entered", tmp_path / "go"
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), KB_ENTERED=str(entered), KB_GO=str(go))
    # --no-sandbox: this kernel signals the test through files outside its run folder
    cmd = [
        sys.executable,
        "-m",
        "tracker",
        "run",
        str(kernel),
        "--suite=smoke",
        "--mode=test",
        "--cases=0",
        "--no-sandbox",
    ]
    proc = subprocess.Popen(
        [*cmd, f"--store={store}", "--json", "--quiet"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not entered.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
        time.sleep(0.05)
    folder.rename(tmp_path / "moved")
    folder.write_text("not a folder any more")
    go.touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = json.loads(out)
    side = Path(summary["side_file"])
    assert side.parent == tmp_path / "state" / "kernelbeam" / "pending" and side.is_file()
    assert str(side) in err and "Traceback" not in err
    assert summary["record"]["run"]["run_id"] == summary["run_id"]
    assert store_mod.read_side_file(side).run.status == "passed"
    assert not [p for p in side.parent.iterdir() if p.suffix == ".tmp"]
    # where the message says: copy it next to the store (now at moved/) and import
    moved = tmp_path / "moved" / "s.duckdb"
    Store(moved).pending_dir.mkdir(exist_ok=True)  # it holds the run's checkpoint, which the copy replaces
    shutil.copy(side, Store(moved).pending_dir)
    assert Store(moved).flush_pending().written == [summary["run_id"]]
    assert Store(moved).get_run(summary["run_id"])["status"] == "passed"


def test_unreadable_side_files_are_kept_and_reported(tmp_path):
    store = tmp_path / "s.duckdb"
    folder = Store(store).pending_dir
    folder.mkdir()
    good = store_mod.side_text(make_run("good00000001"))
    (folder / "broken000001.json").write_text(good.replace("good00000001", "broken000001")[:-40])  # cut off
    (folder / "good00000001.json").write_text(good)
    flushed = store_mod.FlushResult()
    assert Store(store).finish_run(make_run("next00000001"), flushed=flushed) is None
    assert flushed.written == ["good00000001"]
    assert [p.name for p, _ in flushed.unreadable] == ["broken000001.json"]
    assert "signature does not match" in flushed.unreadable[0][1]
    proc = subprocess.run(
        [sys.executable, "-m", "tracker", "import", "--store", str(store), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0
    report = json.loads(proc.stdout)
    assert report["unreadable_side_files"][0]["path"] == str(folder / "broken000001.json")
    assert "broken000001.json kept" in proc.stderr and "could not be read" in proc.stderr
    assert (folder / "broken000001.json").exists()


# ------------------------------------------------------------------------------ 4. writers are not starved

READER = """
import os, sys
from tracker.store import Store
store, stop, run_id = sys.argv[1:4]
n = 0
while not os.path.exists(stop):
    Store(store).list_runs()
    Store(store).run_bundle(run_id)
    n += 1
    if n == 1:
        print("reading", flush=True)
print(n, flush=True)
"""
WRITER = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
from test_store import make_run
from tracker import store as s
record = make_run(sys.argv[2])
t0 = time.monotonic()
pending = s.Store(sys.argv[1]).finish_run(record)
print(json.dumps({"wait_s": time.monotonic() - t0, "pending": str(pending.path) if pending else None}))
"""


def test_readers_back_to_back_do_not_starve_writers(demo_store, tmp_path):
    path, ids = demo_store
    stop = tmp_path / "stop"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    readers = [
        subprocess.Popen([sys.executable, "-c", READER, str(path), str(stop), ids["regressed"]], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]  # fmt: skip
    try:
        for r in readers:
            assert r.stdout.readline().strip() == "reading"
        writers = [
            subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"stress{k:08d}", str(ROOT / "tests")],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for k in range(4)
        ]  # fmt: skip
        results = []
        for w in writers:
            out, err = w.communicate(timeout=120)
            assert w.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        stop.touch()
        reads = [int(r.communicate(timeout=60)[0].strip().splitlines()[-1]) for r in readers]
    waits = sorted(r["wait_s"] for r in results)
    print(f"writer waits (s): min {waits[0]:.2f} median {statistics.median(waits):.2f} max {waits[-1]:.2f}; "
          f"reads per reader {reads}")  # fmt: skip
    assert all(r["pending"] is None for r in results), results
    assert {f"stress{k:08d}" for k in range(4)} <= run_ids(path)
    assert not Store(path).pending_dir.exists() or not list(Store(path).pending_dir.iterdir())
    assert min(reads) >= 2  # the readers kept reading


# -------------------------------------------------------------------------------- 5. status true when shown


def test_a_run_waiting_in_a_side_file_shows_pending_and_is_not_reaped(tmp_path, monkeypatch):
    store = tmp_path / "s.duckdb"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record = make_run("wait00000001", pid=gone.pid)
    Store(store).start_run(record)
    with held(store):
        pending = Store(store).finish_run(record, retry_seconds=0.3)
    assert pending is not None and pending.path.is_file()
    run = Store(store).get_run("wait00000001")
    assert run["status"] == "pending" and run["side_file"] == str(pending.path)
    assert Store(store).list_runs().set_index("run_id").loc["wait00000001", "status"] == "pending"
    Store(store).add_verdict("wait00000001", "inconclusive", "any write opens the store as a writer")
    with Store(store).connect(read_only=True) as con:  # the reaper left it alone
        assert con.execute("SELECT status FROM runs WHERE run_id = 'wait00000001'").fetchone()[0] == "running"
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/run.py", id="wait00000001")
    assert "waits in the side file" in texts(at.info) and str(pending.path) in texts(at.info)
    show = subprocess.run(
        [sys.executable, "-m", "tracker", "show", "wait00000001", "--store", str(store)],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "pending" in show.stdout and str(pending.path) in show.stdout
    assert Store(store).flush_pending().written == ["wait00000001"]
    assert Store(store).get_run("wait00000001")["status"] == "passed"
    assert counts(store)["runs"] == 1


def test_a_run_whose_process_is_gone_shows_crashed_on_the_run_page(tmp_path, monkeypatch):
    store = tmp_path / "s.duckdb"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    Store(store).start_run(make_run("dead00000001", pid=gone.pid))
    before = fingerprint(store)
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/run.py", id="dead00000001")
    assert "crashed" in at.subheader[0].value
    assert fingerprint(store) == before  # shown without writing


def test_waiting_writer_says_what_it_waits_for(tmp_path, monkeypatch):
    store = tmp_path / "s.duckdb"
    with Store(store).connect():
        pass
    code = textwrap.dedent(
        f"""
        from tracker.store import Store, StoreLockedError, connection
        connection.WAIT_REPORT_SECONDS = 0.5
        try:
            with Store({str(store)!r}).connect(retry_seconds=1.6):
                pass
        except StoreLockedError as exc:
            print("gave up:", exc)
        """
    )
    with held(store):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "gave up" in proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if "is locked by another process" in ln]
    assert len(lines) >= 2 and "waiting" in lines[0] and "/ 2 s" in lines[0] and "(pid " in lines[0]
    assert not list(tmp_path.glob("s.duckdb.writer-waiting.*"))  # the marker is gone with its writer


# ----------------------------------------------------------------------- 6. a token beyond 127.0.0.1


def test_beyond_localhost_every_page_wants_the_token(own_demo_store, monkeypatch):
    path, ids = own_demo_store
    monkeypatch.setenv("KERNELBEAM_ADDRESS", "0.0.0.0")
    monkeypatch.setenv("KERNELBEAM_TOKEN", "s3cret-token")
    for page in PAGES:
        at = open_page(page)
        assert "Token required" in texts(at.error), page
        assert not at.dataframe and not at.button, page  # nothing of the store, no Start button
    at = open_page("pages/run.py", id=ids["regressed"], token="wrong")
    assert "Token required" in texts(at.error) and not at.dataframe
    at = open_page("pages/run.py", id=ids["regressed"], token="s3cret-token")
    assert not at.error, texts(at.error)
    assert at.dataframe and "token" not in at.query_params
    at.switch_page("pages/benchmark.py").run()  # the session keeps the token: the Start button is there
    assert not at.error and at.button(key="bm_start")


def test_beyond_localhost_without_a_configured_token_nothing_renders(demo_store, monkeypatch):
    monkeypatch.setenv("KERNELBEAM_ADDRESS", "0.0.0.0")
    at = open_page(token="")
    assert "no KERNELBEAM_TOKEN is set" in texts(at.error) and not at.dataframe


def test_on_localhost_no_token_is_asked(demo_store, monkeypatch):
    monkeypatch.setenv("KERNELBEAM_ADDRESS", "127.0.0.1")
    monkeypatch.setenv("KERNELBEAM_TOKEN", "s3cret-token")
    at = open_page()
    assert not at.error and at.dataframe


def test_dashboard_script_makes_and_prints_a_token_beyond_localhost(tmp_path):
    """scripts/dashboard.sh up to the exec: the token it makes is printed in a link (streamlit is replaced by a
    stub python that only prints its arguments and the token it sees)."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "python3").write_text(
        '#!/bin/sh\nif [ "$1" = "-m" ]; then echo "ARGS $* TOKEN=$KERNELBEAM_TOKEN"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    (stub / "python3").chmod(0o755)
    (stub / "python").symlink_to(stub / "python3")  # install.sh's venv python is plain `python`
    script = tmp_path / "repo" / "scripts"
    script.mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "dashboard.sh", script)
    (script / "install.sh").write_text("true\n")
    env = dict(os.environ, PATH=f"{stub}:{os.environ['PATH']}", KERNELBEAM_ADDRESS="0.0.0.0")
    env.pop("KERNELBEAM_TOKEN", None)
    proc = subprocess.run(["bash", str(script / "dashboard.sh")], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.split("TOKEN=")[1].strip()
    assert len(token) >= 24 and f"?token={token}" in proc.stderr
    assert "--server.address 0.0.0.0" in proc.stdout


def test_what_another_process_plants_in_the_side_folder_blocks_no_command_and_replaces_no_run(tmp_path):
    """Without the key, a process of the same user planted in `<store>.pending/`: a FIFO named like a side file
    (every command that opened the store hung on it), a 6 GB sparse file behind a side-file header (read whole: a
    MemoryError sent every later run into a side file), a link to a signed side file of another store (the flush
    followed it out of the folder), an empty file named after a dead `running` run (kept it `running` for good), and
    a signed checkpoint of a recorded run copied back after the run (it replaced the `passed` run with `crashed`)."""
    store = tmp_path / "s.duckdb"
    done = make_run("done00000001")
    assert Store(store).finish_run(done) is None
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    Store(store).start_run(make_run("dead00000001", pid=gone.pid))
    other = tmp_path / "other.duckdb"
    elsewhere = save_side_file(other, make_run("else00000001"), "the store stayed locked").path
    replay = make_run("done00000001")
    replay.run.status = "crashed"
    pending = Path(f"{store}.pending")
    pending.mkdir(exist_ok=True)
    os.mkfifo(pending / "zzz.json")
    with open(pending / "0000.json", "wb") as f:
        f.write(b"kernelbeam-side-v1 0 " + b"0" * 64 + b"\n")
        f.truncate(6 << 30)
    (pending / "link.json").symlink_to(elsewhere)
    (pending / "dead00000001.json").write_text("")
    shutil.copy(save_side_file(tmp_path / "copy.duckdb", replay, "x").path, pending / "replay.json")
    listed = subprocess.run([sys.executable, "-m", "tracker", "list", "--json", "--store", str(store)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    result = Store(store).flush_pending()
    assert result.written == [] and {p.name for p, _ in result.unreadable} >= {"zzz.json", "0000.json", "link.json"}
    assert Store(store).get_run("done00000001")["status"] == "passed" and not (pending / "replay.json").exists()
    assert Store(store).get_run("else00000001") is None and elsewhere.is_file()
    assert Store(store).get_run("dead00000001")["status"] == "crashed"
