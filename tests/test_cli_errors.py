"""Bad input, class by class: every one ends in exactly one line `error: ...` on stderr and exit 2, never a
traceback, and nothing is written. Most go through main() in-process (fast); a few through real subprocesses."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import old_store
from tracker.cli.main import main
from tracker.store import SCHEMA_VERSION, Store, schema_version

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = str(ROOT / "kernels" / "geqrf_reference.py")
SAMPLES = sorted(p.parent for p in (ROOT / "samples").glob("*/runs.parquet"))


def call(capsys, *args: str) -> tuple[int, str, str]:
    try:
        rc = main(list(args))
    except SystemExit as exc:  # argparse's own errors
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def assert_bad_input(result: tuple[int, str, str], *words: str) -> str:
    rc, out, err = result
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and out == ""
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def newer_store(demo_store) -> Path:
    path, _ = demo_store
    with duckdb.connect(str(path)) as con:
        con.execute("INSERT INTO schema_version VALUES (?, now())", [SCHEMA_VERSION + 5])
    return path


@pytest.fixture
def foreign_store(tmp_path) -> Path:
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE invoices (id INTEGER, amount DOUBLE)")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show", "hh00"],
        ["compare", "hh00aaaaaaaa", "hh01aaaaaaaa"],
        ["regressions", "--family", "householder"],
        ["verdict", "hh00aaaaaaaa", "promoted"],
        ["run", REFERENCE, "--suite", "smoke", "--cases", "0", "--mode", "test"],
        ["export", "--out", "{tmp}/exp"],
        ["import", str(SAMPLES[0])],
    ],
)
def test_a_store_with_a_newer_schema_is_refused_by_reads_and_writes(capsys, newer_store, tmp_path, args):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    before = newer_store.stat().st_mtime_ns
    assert_bad_input(call(capsys, *args, "--store", str(newer_store)), f"v{SCHEMA_VERSION + 5}", "upgrade")
    assert newer_store.stat().st_mtime_ns == before


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["show", "abc"],
        ["regressions", "--family", "x"],
        ["verdict", "abc", "promoted"],
        ["run", REFERENCE, "--suite", "smoke", "--cases", "0"],
        ["import", str(SAMPLES[0])],
    ],
)
def test_a_duckdb_file_without_our_tables_is_not_a_store(capsys, foreign_store, args):
    assert_bad_input(call(capsys, *args, "--store", str(foreign_store)), "not a KernelBeam store")
    with duckdb.connect(str(foreign_store), read_only=True) as con:  # nothing was migrated into it
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert tables == {"invoices"}


def test_an_empty_duckdb_file_is_not_a_store_for_reads(capsys, tmp_path):
    path = tmp_path / "blank.duckdb"
    duckdb.connect(str(path)).close()
    assert_bad_input(call(capsys, "show", "abc", "--store", str(path)), "no runs table")


@pytest.mark.parametrize(
    "args,words",
    [
        (["--seed", str(2**70)], ("--seed", "out of range")),
        (["--seed", str(-(2**63) - 1)], ("--seed", "out of range")),
        (["--seed", "2**70"], ("--seed", "expected an integer")),
        (["--seed", str(2**63 - 1)], ("--seed", "out of range", "transform")),
        (["--timeout", "nan"], ("--timeout", "finite")),
        (["--timeout", "inf"], ("--timeout", "finite")),
        (["--timeout", "0"], ("--timeout", "above 0")),
        (["--timeout", "-5"], ("--timeout", "above 0")),
        (["--cases", ","], ("--cases names no case",)),
        (["--cases", ""], ("--cases names no case",)),
        (["--cases", " , ,"], ("--cases names no case",)),
        (["--cases", "1,x"], ("--cases takes case numbers",)),
        (["--cases", "-1"], ("out of range",)),
    ],
)
def test_bad_run_options_are_refused_before_anything_runs(capsys, tmp_path, args, words):
    store = tmp_path / "runs.duckdb"
    assert_bad_input(call(capsys, "run", REFERENCE, "--suite", "smoke", *args, "--store", str(store)), *words)
    assert not store.exists()


@pytest.mark.parametrize("limit", ["-1", "0", "x", str(2**70)])
def test_list_limit_must_be_a_positive_integer(capsys, demo_store, limit):
    assert_bad_input(call(capsys, "list", f"--limit={limit}", "--store", str(demo_store[0])), "--limit")


@pytest.mark.parametrize("value", ["nan", "-0.1", "1.5", "inf"])
def test_compare_min_effect_must_be_a_fraction(capsys, demo_store, value):
    path, ids = demo_store
    a, b = ids["householder"][:2]
    assert_bad_input(call(capsys, "compare", a, b, "--min-effect", value, "--store", str(path)), "--min-effect")


def _export(tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    shutil.copytree(SAMPLES[0], folder)
    return folder


def test_import_refuses_garbage_bytes(capsys, tmp_path):
    folder = _export(tmp_path)
    (folder / "case_results.parquet").write_bytes(os.urandom(4096))
    store = tmp_path / "s.duckdb"
    assert_bad_input(call(capsys, "import", str(folder), "--store", str(store)), "not a readable Parquet file")
    assert not store.exists()


def test_import_refuses_a_truncated_file(capsys, tmp_path):
    folder = _export(tmp_path)
    path = folder / "samples.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    store = tmp_path / "s.duckdb"
    assert_bad_input(call(capsys, "import", str(folder), "--store", str(store)), "samples.parquet")
    assert not store.exists()


def test_import_refuses_parquet_with_the_wrong_columns(capsys, tmp_path):
    folder = _export(tmp_path)
    with duckdb.connect() as con:
        target = str(folder / "runs.parquet").replace("'", "''")
        con.execute(f"COPY (SELECT 1 AS id, 'x' AS name) TO '{target}' (FORMAT parquet)")
    store = tmp_path / "s.duckdb"
    assert_bad_input(call(capsys, "import", str(folder), "--store", str(store)), "lacks columns", "run_id")
    assert not store.exists()


@pytest.mark.parametrize(
    "args",
    [["export", "--out", ""], ["import", ""], ["list", "--store", ""], ["run", "", "--suite", "smoke"]],
)
def test_an_empty_path_is_refused_not_taken_as_the_current_folder(capsys, demo_store, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    if "--store" not in args:
        args = [*args, "--store", str(demo_store[0])]
    assert_bad_input(call(capsys, *args), "empty")
    assert list(tmp_path.iterdir()) == [demo_store[0]]  # nothing was written into the current folder


def test_import_of_a_missing_folder(capsys, tmp_path):
    assert_bad_input(call(capsys, "import", str(tmp_path / "nope"), "--store", str(tmp_path / "s.duckdb")), "nope")


def test_export_onto_an_existing_file_is_refused(capsys, demo_store, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("keep me\n")
    assert_bad_input(call(capsys, "export", "--out", str(target), "--store", str(demo_store[0])), "existing file")
    assert target.read_text() == "keep me\n"


def test_an_unknown_family_or_path_says_so_and_lists_the_known_ones(capsys, demo_store, tmp_path):
    path, _ = demo_store
    for command in ("regressions", "lineage", "variants", "leaderboard"):  # never an empty table with exit 0
        line = assert_bad_input(call(capsys, command, "--family", "nope", "--store", str(path)), "no family 'nope'")
        assert "householder" in line and "wy" in line, command
    kernel = tmp_path / "fresh.py"
    kernel.write_text("def custom_kernel(data):\n    return data\n")
    assert main(["add", str(kernel), "--family", "fresh", "--store", str(path)]) == 0
    capsys.readouterr()
    assert_bad_input(call(capsys, "regressions", "--family", "fresh", "--store", str(path)), "no runs in family")
    line = assert_bad_input(call(capsys, "regressions", "--path", "kernels/nope.py", "--store", str(path)), "path")
    assert "kernels/householder_torch.py" in line
    assert_bad_input(
        call(capsys, "regressions", "--family", "householder", "--suite", "nope", "--store", str(path)), "suites"
    )


def test_an_ambiguous_prefix_lists_the_runs_it_matches(capsys, demo_store):
    path, ids = demo_store
    line = assert_bad_input(call(capsys, "show", "hh0", "--store", str(path)), "ambiguous")
    assert sum(run_id in line for run_id in ids["householder"]) == 5
    assert_bad_input(call(capsys, "show", "zzz", "--store", str(path)), "no run matches")
    rc, out, _ = call(capsys, "show", "hh05", "--json", "--store", str(path))  # unique prefix still works
    assert rc == 0 and ids["householder"][5] in out


def test_a_store_that_is_a_directory_is_reported_as_such(capsys, tmp_path):
    folder = tmp_path / "store.duckdb"
    folder.mkdir()
    for args in (["list"], ["show", "abc"], ["run", REFERENCE, "--suite", "smoke"], ["import", str(SAMPLES[0])]):
        assert_bad_input(call(capsys, *args, "--store", str(folder)), "is a directory")


def test_a_store_on_a_read_only_file_system_is_reported_as_such(capsys):
    ro = next((p for p in ("/proc", "/sys") if os.statvfs(p).f_flag & os.ST_RDONLY), None)
    if ro is None:
        pytest.skip("no read-only file system to try on this machine")
    assert_bad_input(call(capsys, "import", str(SAMPLES[0]), "--store", f"{ro}/kb.duckdb"), "read-only file system")


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="no sysfs here")
def test_a_store_in_a_folder_nobody_may_create_files_in_is_not_called_a_bad_database(capsys):
    # sysfs refuses new files even to root: the store cannot be written, which is what the message must say.
    line = assert_bad_input(call(capsys, "import", str(SAMPLES[0]), "--store", "/sys/kb.duckdb"), "/sys/kb.duckdb")
    assert "not a DuckDB store" not in line
    assert "permission denied" in line or "read-only file system" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any file: permissions cannot be tested as root")
def test_a_store_without_write_permission_is_reported_as_such(capsys, demo_store):
    path, ids = demo_store
    path.chmod(0o444)
    try:
        assert_bad_input(
            call(capsys, "verdict", ids["householder"][0], "promoted", "--store", str(path)), "permission denied"
        )
    finally:
        path.chmod(0o644)


@contextlib.contextmanager
def read_only(file: Path):
    """The file mode 444 in a folder of mode 555; as root, whom modes do not stop, also immutable (chattr +i), which
    stops root's writes too. Skips where root runs and the flag cannot be set (no capability, file system)."""
    folder = file.parent
    file.chmod(0o444)
    folder.chmod(0o555)
    flagged = False
    try:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            flagged = chattr is not None
            if not flagged or subprocess.run([chattr, "+i", str(file), str(folder)], capture_output=True).returncode:
                pytest.skip("root may write any file and the immutable flag cannot be set here (chattr +i)")
        yield
    finally:
        if flagged:
            subprocess.run([shutil.which("chattr") or "chattr", "-i", str(file), str(folder)], capture_output=True)
        folder.chmod(0o755)
        file.chmod(0o644)


def test_a_read_only_store_of_an_older_schema_is_one_error_line_saying_how_to_upgrade_it(capsys, demo_store, tmp_path):
    """A read upgrades an older store first; one it cannot write is refused (exit 2), not read with today's
    queries, and is left as it was."""
    path, _ = demo_store
    (tmp_path / "ro").mkdir()
    old = old_store(tmp_path / "ro" / "old.duckdb", 5, path)
    before = old.read_bytes()
    words = (f"store {old} has schema v5, older than this tracker's v{SCHEMA_VERSION}", "read-only",
             "copy it somewhere writable")  # fmt: skip
    with read_only(old):
        for command in ("list", "leaderboard", "lineage", "variants"):
            assert_bad_input(call(capsys, command, "--store", str(old)), *words)
        proc = subprocess.run([sys.executable, "-m", "tracker", "list", "--store", str(old)], capture_output=True,
                              text=True, cwd=ROOT, timeout=90)  # fmt: skip
        assert_bad_input((proc.returncode, proc.stdout, proc.stderr), *words)
    assert old.read_bytes() == before and sorted(p.name for p in old.parent.iterdir()) == ["old.duckdb"]
    with Store(old).connect(read_only=True) as con:
        assert schema_version(con) == 5


def test_unknown_commands_and_options_give_one_error_line(capsys, tmp_path):
    assert_bad_input(call(capsys, "frobnicate"), "invalid choice")
    assert_bad_input(call(capsys, "list", "--colour"), "unrecognized arguments")
    assert_bad_input(call(capsys, "verdict", "abc", "wonderful"), "invalid choice")
    assert_bad_input(call(capsys, "run", "kernels/none.py", "--store", str(tmp_path / "s.duckdb")), "no kernel file")


def test_subprocess_bad_inputs_end_in_one_line_and_exit_2(tmp_path):
    """The same contract through the real entry point, on a few of the classes above."""
    store = tmp_path / "s.duckdb"
    for args in (
        ["run", REFERENCE, "--suite", "smoke", "--seed", str(2**70)],
        ["list", "--limit=-1"],
        ["run", REFERENCE, "--suite", "smoke", "--cases", ","],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "tracker", *args, "--store", str(store)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert not store.exists()


def test_an_internal_error_is_one_line_with_a_hint_and_exit_1(capsys, demo_store, monkeypatch):
    path, _ = demo_store

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(Store, "list_runs", broken)  # a bug in a read, not a stand-in for the product
    rc, out, err = call(capsys, "list", "--store", str(path))
    assert rc == 1 and err.startswith("error: internal error: ZeroDivisionError") and "KERNELBEAM_DEBUG=1" in err
    assert "Traceback" not in err
    monkeypatch.setenv("KERNELBEAM_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["list", "--store", str(path)])


@pytest.mark.parametrize("error", [ValueError("bad value"), KeyError("key")])
def test_a_value_or_key_error_of_ours_is_an_internal_error_not_bad_input(capsys, demo_store, monkeypatch, error):
    path, _ = demo_store

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(Store, "list_runs", broken)  # a bug in a read: not the user's input
    rc, out, err = call(capsys, "list", "--store", str(path))
    assert rc == 1 and err.startswith(f"error: internal error: {type(error).__name__}"), err


def test_a_good_store_still_reads_after_the_checks(capsys, demo_store):
    path, ids = demo_store
    rc, out, err = call(capsys, "list", "--store", str(path))
    assert rc == 0 and ids["householder"][0] in out
    with Store(path).connect(read_only=True) as con:
        assert con.execute("SELECT max(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION


# ---------------------------------------------------------------------- smaller defects, through `python -m tracker`


def _cli_all(commands: list[list[str]], env: dict[str, str] | None = None) -> list[subprocess.CompletedProcess]:
    """Run the commands as real `python -m tracker` processes side by side (each one imports the tracker anew)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tracker", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for args in commands
    ]
    done = []
    for args, proc in zip(commands, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=60)  # a FIFO opened for reading would block here forever
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError(f"{args} did not end") from None
        done.append(subprocess.CompletedProcess(args, proc.returncode, out, err))
    return done


def _one_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (proc.args, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.args
    for w in words:
        assert w in lines[0], (proc.args, lines[0])
    return lines[0]


def test_small_bad_inputs_end_in_one_error_line_and_exit_2(tmp_path):
    fifo = tmp_path / "pipe.duckdb"
    os.mkfifo(fifo)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "helper.py").write_text("def helper():\n    return 1\n")  # no custom_kernel
    bad_log = tmp_path / "empty" / "bad.log"  # a result stream with a word for a time
    bad_log.write_text("benchmark-count: 1\nbenchmark.0.spec: batch: 2; n: 8; seed: 1\nbenchmark.0.mean: fast\n")
    store = tmp_path / "s.duckdb"
    cases = [
        (["list", "--store", str(fifo)], ("is a FIFO, not a regular file",)),
        (["list", "--store", str(store)], (f"no store at {store}",)),
        (["run", str(tmp_path / "empty"), "--store", str(store)], ("no kernel files in", "empty")),
        (["run", "--store", str(store)], ("run needs a kernel file or folder",)),
        (["since", "99999999999999h", "--store", str(store)], ("out of range",)),
        (["run", REFERENCE, "--suite", "smoke", "--device", "cuda", "--store", str(store)], ("--device cuda",)),
        (["run", str(ROOT / "kernels"), "--device", "cuda", "--store", str(store)], ("--device cuda",)),
        (
            ["import-results", str(bad_log), "--variant", REFERENCE, "--gpu", "G", "--store", str(store)],
            ("benchmark.0.mean is not a number",),
        ),
    ]
    env = dict(os.environ, KERNELBEAM_NO_GPU="1")  # no GPU here, whatever this machine has
    for (_, words), proc in zip(cases, _cli_all([a for a, _ in cases], env), strict=True):
        _one_error(proc, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "pipe.duckdb"]  # no store was created


def _real_store(tmp_path: Path) -> Path:
    """A store as the tracker writes it: the shipped sample runs imported."""
    path = tmp_path / "real.duckdb"
    assert main(["import", str(SAMPLES[0]), "--store", str(path)]) == 0
    return path


def test_a_half_truncated_store_is_named_damaged(capsys, tmp_path):
    whole = _real_store(tmp_path)
    half = tmp_path / "half.duckdb"
    # Cut to a third: what `list` reads must lie beyond the cut, and where DuckDB puts a table's blocks moves as
    # tables are added (with v12's variant_names a cut at half left every block of the runs table in place).
    half.write_bytes(whole.read_bytes()[: whole.stat().st_size // 3])
    before = half.read_bytes()
    commands = [["list", "--store", str(half)], ["run", REFERENCE, "--suite", "smoke", "--store", str(half)]]
    for proc in _cli_all(commands):
        _one_error(proc, f"the store {half} is damaged")
    assert half.read_bytes() == before


@pytest.fixture
def full_disk(tmp_path):
    """An 8 MiB tmpfs (room for the sample store, 4.0 MiB) filled to the last byte (root only); unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip() or 'mount failed'}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> None:
    """Write zeros until the file system refuses one more byte."""
    with open(folder / "filler", "wb", buffering=0) as f:
        for size in (1 << 16, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass


def test_a_full_disk_before_a_run_is_named(tmp_path, full_disk):
    store = full_disk / "s.duckdb"
    store.write_bytes(_real_store(tmp_path).read_bytes())
    _fill(full_disk)
    before = store.read_bytes()
    case = ["--suite", "smoke", "--mode", "test", "--cases", "0"]
    fresh = full_disk / "new.duckdb"
    commands = [["run", REFERENCE, *case, "--store", str(store)], ["run", REFERENCE, *case, "--store", str(fresh)]]
    for proc, path in zip(_cli_all(commands), (store, fresh), strict=True):
        _one_error(proc, f"no space left on device writing {path}")
    assert store.read_bytes() == before and not fresh.exists()  # no empty file left to be mistaken for a store
