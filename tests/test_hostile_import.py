"""Imported data stays data (issue 18, items 3 and 4), with real export folders corrupted with pyarrow, a real
git repository whose configuration runs a script, a real zip bomb and real CLI processes:

- import (and the side-file flush) refuses bad values with one `error:` line naming file, run and column;
- git never runs a configured program, and never in a repository that a stored run names;
- stored text reaches the dashboard's Markdown escaped and the terminal without control sequences;
- malformed JSON already in a store does not break the Run page or `show`;
- a zip bomb in the evidence is refused by `recheck` with little memory.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, T0, make_record, open_page
from tracker import store as store_mod
from tracker.capture import envinfo, evidence
from tracker.cli.main import main
from tracker.common.errors import InputError
from tracker.common.gitinfo import capture_git, diff_commits
from tracker.store import Store, validate
from tracker.store.sidefiles import save_side_file
from tracker.store.transfer import export_runs, import_runs
from tracker.store.validate import InvalidImport
from tracker.variants.register import file_snapshots

# One worker takes the whole module, so the run behind `one_run_export` is made once, not once per worker.
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("hostile_import_run")]
SMOKE_MEANS = [40.0, 90.0, 150.0, 260.0]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    empty = tmp_path / "no-samples"
    empty.mkdir()
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(empty))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    envinfo.gpu_available.cache_clear()
    import streamlit as st

    st.cache_data.clear()


def record(run_id: str, source: str = "x = 1\n", **run: object) -> store_mod.RunRecord:
    rec = make_record(
        run_id, variant="v", source=source, path="k.py", family="f", started=T0, means=SMOKE_MEANS, suite="smoke"
    )
    rec.run.update(run)
    return rec


def exported(tmp_path: Path, *records: store_mod.RunRecord) -> Path:
    """An export folder made by the real export from a store written through the tracker's write path."""
    store = tmp_path / "source.duckdb"
    for rec in records:
        assert Store(store).finish_run(rec) is None
    folder = tmp_path / "export"
    export_runs(store, folder)
    return folder


def corrupt(folder: Path, table: str, column: str, value: object, row: int = 0) -> None:
    """Set one cell of an export file, keeping the column's Parquet type."""
    path = folder / f"{table}.parquet"
    data = pq.read_table(path)
    i = data.schema.get_field_index(column)
    cells = data.column(column).to_pylist()
    cells[row] = value
    pq.write_table(data.set_column(i, data.schema.field(i), pa.array(cells, data.schema.field(i).type)), path)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tracker", *args], capture_output=True, text=True, cwd=cwd or ROOT, env=env, timeout=90
    )


# ------------------------------------------------------------------------------------------- value checks

BAD_VALUES = [
    ("samples", "time_us", float("nan"), "not a finite number"),
    ("samples", "time_us", float("inf"), "not a finite number"),
    ("samples", "time_us", -3.0, "not a positive time"),
    ("samples", "time_us", 0.0, "not a positive time"),
    ("case_results", "mean_us", 0.0, "not a positive time"),
    ("case_results", "std_us", -1.0, "is negative"),
    ("runs", "geomean_us", float("nan"), "not a finite number"),
    ("runs", "started_at", "2099-01-01T00:00:00+00:00", "implausible time"),
    ("runs", "finished_at", "1970-01-02T00:00:00+00:00", "implausible time"),
    ("runs", "flags", '{"code": "x"}', "not a JSON list"),
    ("runs", "flags", "[{'code': 'x'}", "not valid JSON"),
    ("runs", "flags", '[{"code": 1, "message": "m", "line": 1}]', "lacks a text code"),
    ("runs", "flags", '[{"code": "x", "message": "m"}]', "no line"),  # `show` printed flag["line"]: KeyError
    # ~1,000 levels parsed at import but raised RecursionError on the home page's deeper stack
    (
        "runs",
        "flags",
        '[{"code": "x", "message": "m", "line": 1, "x": ' + "[" * 980 + "]" * 980 + "}]",
        "nested deeper",
    ),
    ("runs", "helper_sources", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper"),
    ("runs", "device_load_start", "[1, 2", "not valid JSON"),
    ("case_results", "args", '"a string"', "not a JSON object"),
]


@pytest.fixture(scope="module")
def one_run_export(tmp_path_factory) -> Path:
    return exported(tmp_path_factory.mktemp("base"), record("good00000001"))


@pytest.mark.parametrize(
    ("table", "column", "value", "why"), BAD_VALUES, ids=[f"{t}.{c}={v!r}" for t, c, v, _ in BAD_VALUES]
)
def test_import_refuses_bad_values_naming_file_run_and_column(tmp_path, one_run_export, table, column, value, why):
    folder = tmp_path / "export"
    shutil.copytree(one_run_export, folder)
    if column.endswith("_at"):
        from datetime import datetime

        value = datetime.fromisoformat(value)
    corrupt(folder, table, column, value)
    target = tmp_path / "target.duckdb"
    with pytest.raises(InvalidImport) as err:
        import_runs(target, folder)
    message = str(err.value)
    assert f"{table}.parquet" in message and "good00000001" in message and repr(column) in message and why in message
    assert not target.exists()


def test_import_refuses_a_variant_whose_hash_is_not_its_sources(tmp_path):
    """An export that names another file's hash for its own source would lend that source the file's runs: the
    next local run of the file would show the imported code as its own (`show --source`)."""
    folder = exported(tmp_path, record("good00000001"))
    corrupt(folder, "variants", "source", "import os  # not the source this hash is of\n")
    target = tmp_path / "target.duckdb"
    with pytest.raises(InvalidImport, match="not the hash of the variant's source"):
        import_runs(target, folder)
    assert not target.exists()


def test_the_cli_refuses_with_one_error_line_and_the_store_is_unchanged(tmp_path):
    folder = exported(tmp_path, record("good00000001"))
    corrupt(folder, "samples", "time_us", float("nan"), row=3)
    target = tmp_path / "target.duckdb"
    assert Store(target).finish_run(record("mine00000001", source="y = 2\n")) is None
    before = target.read_bytes()
    proc = cli("import", str(folder), "--store", str(target))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "samples.parquet, row 3 (run good00000001)" in lines[0] and "'time_us'" in lines[0]
    assert target.read_bytes() == before


def test_per_run_bounds_over_all_tables(tmp_path, monkeypatch):
    """Every value within its column's cap, but one run's text (or evidence) over its total: refused."""
    rec = record("good00000001", error="e" * 3000, warnings="w" * 3000, log_tail="l" * 3000)
    folder = exported(tmp_path, rec)
    monkeypatch.setattr(validate, "MAX_RUN_TEXT_CHARS", 8000)
    with pytest.raises(InvalidImport, match=r"run good00000001 holds more than 8,000 characters of text"):
        import_runs(tmp_path / "t.duckdb", folder)
    monkeypatch.undo()
    blob = evidence.pack({"a": np.ones((8, 8))}, {"case_idx": 0})
    rec = record("evid00000001", status="failed")
    rec.evidence = [{"case_idx": i, "arrays": blob, "arrays_bytes": len(blob)} for i in range(3)]
    (tmp_path / "e").mkdir()
    folder = exported(tmp_path / "e", rec)
    monkeypatch.setattr(validate, "MAX_BLOB_BYTES", 2 * len(blob) + 1)
    with pytest.raises(InvalidImport, match=r"evidence.parquet, row 2 .*run evid00000001 holds more than"):
        import_runs(tmp_path / "t.duckdb", folder)
    monkeypatch.undo()
    corrupt(folder, "evidence", "arrays_bytes", 7)
    with pytest.raises(InvalidImport, match=r"'arrays_bytes' says 7 but the arrays hold"):
        import_runs(tmp_path / "t.duckdb", folder)


def test_a_case_twice_in_one_run_is_refused_and_cases_sharing_a_label_stay_apart_on_the_boards(tmp_path):
    """Two rows of one case in a run are refused at import. Two cases of a run with one label (a problem folder's
    cases that differ only in their seed: labels leave seeds out) broke the leaderboard of the whole suite and GPU
    ("duplicate entries" from its pivot, in the CLI, the MCP tool and the page): they are told apart by index."""
    from tracker.analysis import summaries

    folder = exported(tmp_path, record("good00000001"))
    path = folder / "case_results.parquet"
    data = pq.read_table(path)
    pq.write_table(pa.concat_tables([data, data.slice(0, 1)]), path)
    with pytest.raises(InvalidImport, match=r"run good00000001 has two rows of case 0"):
        import_runs(tmp_path / "t.duckdb", folder)
    twins = record("twins0000001")
    for row in twins.cases[:2]:
        row["label"] = "size=1024"
    store = tmp_path / "twins.duckdb"
    assert Store(store).finish_run(twins) is None
    board = summaries.leaderboard(Store(store).leaderboard_cells(suite="smoke", gpu=twins.run.gpu))
    assert board["cases"][:2] == ["size=1024 #0", "size=1024 #1"] and len(board["cases"]) == len(twins.cases)
    assert main(["leaderboard", "--suite", "smoke", "--store", str(store)]) == 0


def test_a_side_file_with_bad_values_is_kept_out_of_the_store(tmp_path):
    store = tmp_path / "s.duckdb"
    assert Store(store).finish_run(record("first0000001")) is None
    bad = record("nanrun000001", source="z = 3\n")
    bad.samples[0] = (0, 0, float("nan"))
    future = record("future000001", source="w = 4\n", started_at="2099-05-05 00:00:00+00:00")
    good = record("okrun0000001", source="q = 5\n")
    for rec in (bad, future, good):
        save_side_file(store, rec, "the store stayed locked")
    result = Store(store).flush_pending()
    assert result.written == ["okrun0000001"]
    why = {side.stem: reason for side, reason in result.unreadable}
    assert "time_us" in why["nanrun000001"] and "not a finite number" in why["nanrun000001"]
    assert "started_at" in why["future000001"] and "implausible time" in why["future000001"]
    with duckdb.connect(str(store), read_only=True) as con:  # in the store itself, not the pending listing
        assert sorted(r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()) == [
            "first0000001",
            "okrun0000001",
        ]


# -------------------------------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def hostile_repo(tmp_path) -> tuple[Path, Path, str, str]:
    """A real repository whose .git/config runs a script (external diff, textconv, clean/smudge filters,
    fsmonitor, pager) that writes a marker file. Returns (repo, marker, first commit, second commit)."""
    repo, marker = tmp_path / "hostile", tmp_path / "MARKER"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / ".gitattributes").write_text("*.py diff=evil filter=evil\n")
    (repo / "k.py").write_text("x = 1\n")
    _git(repo, "add", ".gitattributes", "k.py")
    _git(repo, "commit", "-qm", "one")
    (repo / "k.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "two")
    script = tmp_path / "payload.sh"
    script.write_text(f'#!/bin/sh\necho "ran $0 $*" >> {marker}\ncat\n')
    script.chmod(0o755)
    with (repo / ".git" / "config").open("a") as f:  # set after the commits, which would have run it
        f.write(
            f'[diff]\n\texternal = {script}\n[diff "evil"]\n\ttextconv = {script}\n\tcommand = {script}\n'
            f'[filter "evil"]\n\tclean = {script}\n\tsmudge = {script}\n\trequired = true\n'
            f"[core]\n\tfsmonitor = {script}\n\tpager = {script}\n"
        )
    first, second = _git(repo, "rev-parse", "HEAD~1"), _git(repo, "rev-parse", "HEAD")
    # The trap is real: a plain git diff in this repository runs the script.
    subprocess.run(["git", "diff", first, second], cwd=repo, capture_output=True, check=False)
    assert marker.exists(), "the hostile configuration did not run its script"
    marker.unlink()
    return repo, marker, first, second


def test_git_in_a_hostile_repository_runs_no_configured_program(hostile_repo):
    """Even in a repository the user names, diff, status and history run with the configuration cleaned."""
    repo, marker, first, second = hostile_repo
    diff = diff_commits(repo, first, second)
    assert "-x = 1" in diff and "+x = 2" in diff and "ran" not in diff
    (repo / "k.py").write_text("x = 3\n")  # dirty: status and diff would run the clean filter
    (repo / "new.py").write_text("y = 1\n")
    info = capture_git(repo / "k.py")
    assert info["git_commit"] == second and info["git_dirty"] is True and "+x = 3" in info["git_diff"]
    assert "+y = 1" in capture_git(repo / "new.py")["git_diff"]
    snaps = file_snapshots(repo / "k.py")
    assert [s.source for s in snaps] == ["x = 1\n", "x = 2\n", "x = 3\n"] and snaps[1].commit == second
    assert not marker.exists(), marker.read_text()


def test_a_version_too_large_for_any_store_is_left_out_of_the_history(tmp_path):
    """One old commit held a 600 MB submission.py that compressed to 780 KB of history: `add` read it whole (3.6 GB
    of memory) and stored a 600,000,073-character source that no import would take. A version beyond the source
    cap is left out; a working copy beyond it is refused."""
    from tracker.variants.register import MAX_SOURCE_CHARS

    repo = tmp_path / "bomb"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "k.py").write_text("x = 1\n" * (MAX_SOURCE_CHARS // 6 + 1))
    _git(repo, "add", "k.py")
    _git(repo, "commit", "-qm", "big")
    with pytest.raises(InputError, match="larger than"):
        file_snapshots(repo / "k.py")
    (repo / "k.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "small")
    assert [s.source for s in file_snapshots(repo / "k.py")] == ["x = 2\n"]


def test_compare_never_runs_git_in_a_repository_an_imported_run_names(hostile_repo, tmp_path, monkeypatch):
    repo, marker, first, second = hostile_repo
    a = record("hosta0000001", git_repo=str(repo), git_commit=first, path=str(repo / "k.py"))
    b = record("hostb0000001", source="x = 2\n", git_repo=str(repo), git_commit=second, path=str(repo / "k.py"))
    folder = exported(tmp_path, a, b)
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, folder) == 2
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the dashboard runs outside any repository
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/compare.py", a="hosta0000001", b="hostb0000001")
    assert any("are not both in a repository here" in str(e.value) for e in at.info)
    assert any("+x = 2" in str(e.value) for e in at.code)  # the source diff, from the stored sources
    assert not marker.exists(), marker.read_text()


# ------------------------------------------------------------------------------------ text shown as text

MD_PAYLOAD = "[click](https://evil.example/l) ![i](https://evil.example/i.png) <img src=x> https://evil.example/b"


def _markdown_bodies(at) -> list[str]:
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "subheader", "title")
    return [str(e.value) for kind in kinds for e in at.get(kind)]


def test_imported_strings_render_as_text_on_the_run_and_compare_pages(tmp_path, monkeypatch):
    flags = json.dumps([{"code": "x](https://evil.example/f)", "line": 3, "message": MD_PAYLOAD, "severity": "hack"}])
    a = record(
        "mdrun0000001", error=MD_PAYLOAD, warnings=MD_PAYLOAD, gpu=f"GPU {MD_PAYLOAD}", note=MD_PAYLOAD,
        problem="qr_v2", flags=flags, git_commit="a" * 40, git_repo=f"/r {MD_PAYLOAD}", git_branch=MD_PAYLOAD,
    )  # fmt: skip
    b = record("mdrun0000002", source="x = 2\n", gpu=f"GPU {MD_PAYLOAD}")
    b.variant["name"] = b.run.variant = "v[x](https://evil.example/v)"
    folder = exported(tmp_path, a, b)
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, folder) == 2
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    run_page = open_page("pages/run.py", id="mdrun0000001")
    compare_page = open_page("pages/compare.py", a="mdrun0000001", b="mdrun0000002")
    bodies = _markdown_bodies(run_page) + _markdown_bodies(compare_page)
    shown = "\n".join(bodies)
    assert shown.count("evil") >= 8  # the payloads are shown (error, warning, flag, note, gpu, git, variant)
    for body in bodies:  # ... and none of them as a link, an image, HTML or a bare URL
        # What Markdown would parse: CommonMark's backslash escapes taken out, then code spans (literal text)
        live = re.sub(r"`[^`]*`", "", re.sub(r"\\[!-/:-@\[-`{-~]", "", body))
        assert "](" not in live and "<" not in live and "://" not in live, body


def test_malformed_json_already_in_a_store_breaks_neither_page_nor_show(tmp_path, monkeypatch, capsys):
    """A store written before import checked JSON columns: the tracker's own write path takes anything."""
    store = tmp_path / "old.duckdb"
    assert Store(store).finish_run(record("badflags0001", flags='{"not": "a list"')) is None
    monkeypatch.setenv("KERNELBEAM_STORE", str(store))
    at = open_page("pages/run.py", id="badflags0001")
    assert any("flags are not readable" in str(e.value) for e in at.warning)
    assert main(["show", "badflags0001", "--store", str(store)]) == 0
    assert "badflags0001" in capsys.readouterr().out
    deep = '[{"code": "x", "message": "m", "line": 1, "x": ' + "[" * 980 + "]" * 980 + "}]"
    assert Store(store).finish_run(record("deepflags001", flags=deep)) is None
    at = open_page("pages/run.py", id="deepflags001")
    assert any("flags are not readable" in str(e.value) for e in at.warning)
    open_page()  # the home page read every run's flags: RecursionError there, for every visitor of the store


def test_terminal_control_sequences_never_reach_the_terminal(tmp_path, capsys):
    ansi = "\x1b[31mRED\x1b[0m\x1b[2J\x1b]0;pwned-title\x07\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\x9b1A"
    rec = record("ansi00000001", gpu=f"GPU {ansi}", error=f"boom {ansi}\nsecond line", note=ansi)
    rec.variant["name"] = rec.run.variant = f"v{ansi}"
    rec.cases[0].update(passed=False, message=f"bad {ansi}")
    folder = exported(tmp_path, rec)
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, folder) == 1
    listed, shown = cli("list", "--store", str(store)), cli("show", "ansi00000001", "--store", str(store))
    for proc in (listed, shown):
        assert proc.returncode == 0, proc.stderr
        assert not any(c in proc.stdout for c in "\x1b\x07\x9b\x00"), repr(proc.stdout)
        assert "RED" in proc.stdout and "click" in proc.stdout
    assert "second line" in shown.stdout and "bad RED" in shown.stdout
    assert main(["show", "ansi00000001", "--store", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"] == f"GPU {ansi}"  # JSON keeps the stored string exactly


# ---------------------------------------------------------------------------------------- evidence bomb


def _deflate_zeros(mib: int) -> bytes:
    """A raw deflate stream of `mib` MiB of zero bytes built from one compressed MiB repeated (full flushes
    make each copy independent): a few KiB per MiB, without compressing the whole."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    return chunk * mib + c.flush(zlib.Z_FINISH)


def _zip(name: str, data: bytes, declared: int, crc: int) -> bytes:
    """A one-member deflated zip whose directory declares `declared` bytes unpacked."""
    fname = name.encode()
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), declared, len(fname), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data), declared, len(fname), 0, 0, 0, 0, 0, 0
    )
    end = struct.pack(
        "<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(fname), len(local) + len(fname) + len(data), 0
    )
    return local + fname + data + central + fname + end


def _npy_header(elements: int) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (elements,)})
    return buf.getvalue()


def test_an_evidence_zip_bomb_is_refused_by_recheck_with_little_memory(tmp_path):
    mib = 1024  # 1 GiB of zeros after a .npy header that says so, in about a MiB
    header = _npy_header(mib << 17)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH) + _deflate_zeros(mib)
    honest = _zip("a.npy", stream, len(header) + (mib << 20), 0)
    first = (header + bytes(4096))[:4096]  # the directory claims 4 KiB (their CRC); the header inside says 1 GiB
    lying = _zip("a.npy", stream, 4096, zlib.crc32(first))
    assert len(honest) < 2 << 20
    for blob, why in ((honest, "declares 1,073,741,952 bytes"), (lying, "would unpack to 1,073,741,824")):
        with pytest.raises(evidence.EvidenceTooLarge, match=why):
            evidence.unpack(blob)
    rec = record("bomb00000001", status="failed")
    rec.evidence = [{"case_idx": 0, "repetition": -1, "message": "x", "arrays": honest, "arrays_bytes": len(honest)}]
    folder = exported(tmp_path, rec)
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, folder) == 1  # small on disk: the import takes it; unpacking is what is bounded
    out, err, peak = tmp_path / "out", tmp_path / "err", tmp_path / "peak"
    # The CLI's own peak resident memory (VmHWM belongs to the process image: unlike wait4's ru_maxrss it does not
    # inherit the high-water mark of this test process, which forked it).
    report = (
        "import atexit, sys\n"
        "def hwm():\n"
        "    line = next(x for x in open('/proc/self/status') if x.startswith('VmHWM'))\n"
        "    open(sys.argv[1], 'w').write(line.split()[1])\n"
        "atexit.register(hwm)\n"
        "from tracker.cli.main import main\n"
        "raise SystemExit(main(sys.argv[2:]))\n"
    )
    with out.open("w") as o, err.open("w") as e:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = [sys.executable, "-c", report, str(peak), "recheck", "bomb00000001", "--store", str(store)]
        code = subprocess.run(args, stdout=o, stderr=e, cwd=ROOT, env=env, timeout=120).returncode
    lines = err.read_text().strip().splitlines()
    assert code == 2 and len(lines) == 1, err.read_text()
    assert lines[0].startswith("error: case 0: evidence declares") and "at most" in lines[0]
    assert int(peak.read_text()) < 400 * 1024, f"recheck used {peak.read_text()} KiB"


def test_recheck_refuses_evidence_whose_arrays_are_not_float32(tmp_path):
    """Imported evidence may hold any dtype numpy knows: text arrays made recheck end with an internal error (exit 1,
    also its "the reference disagrees" code); now one error line, exit 2."""
    blob = evidence.pack({"a": np.array([["x", "y"], ["z", "w"]]), "h": np.zeros((2, 2), np.float32),
                          "tau": np.zeros(2, np.float32)})  # fmt: skip
    rec = record("text00000001", status="failed")
    rec.evidence = [{"case_idx": 0, "repetition": -1, "message": "x", "arrays": blob, "arrays_bytes": len(blob)}]
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, exported(tmp_path, rec)) == 1
    proc = cli("recheck", "text00000001", "--store", str(store))
    assert proc.returncode == 2 and "the evidence's a are not float32 arrays" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("arrays", "meta", "why"),
    [
        ({"a": (2, 4, 4), "h": (2, 4, 4), "tau": (2, 4)}, None, "are not one matrix"),  # 3-D: too many to unpack
        ({"a": (4,), "h": (4,), "tau": (4,)}, None, "are not one matrix"),
        ({"a": (0, 0), "h": (0, 0), "tau": (0,)}, None, "are not one matrix"),  # ZeroDivisionError
        ({"a": (16, 8), "h": (16, 16), "tau": (8,)}, None, "are not one matrix"),  # a size mismatch in torch
        ({"a": (8, 8), "h": (8, 8), "tau": (8,)}, "[" * 100_000 + "]" * 100_000, "nested deeper"),
    ],
    ids=["3d", "1d", "empty", "mismatch", "deep-meta"],
)
def test_recheck_refuses_evidence_that_is_not_one_matrix_in_one_line(tmp_path, arrays, meta, why):
    """Evidence of odd shapes, made with the tracker's own pack and imported, ended recheck with an internal error
    (and a meta entry 100,000 brackets deep with RecursionError): one error line, exit 2."""
    blob = evidence.pack({k: np.zeros(shape, np.float32) for k, shape in arrays.items()})
    if meta is not None:  # a meta entry as pack writes one, but nested
        buf = io.BytesIO(blob)
        with zipfile.ZipFile(buf, "a") as archive, archive.open("meta.npy", "w") as f:
            np.save(f, np.array(meta))
        blob = buf.getvalue()
    rec = record("odd000000001", status="failed")
    rec.evidence = [{"case_idx": 0, "repetition": -1, "message": "x", "arrays": blob, "arrays_bytes": len(blob)}]
    store = tmp_path / "imported.duckdb"
    assert import_runs(store, exported(tmp_path, rec)) == 1
    proc = cli("recheck", "odd000000001", "--store", str(store))
    assert proc.returncode == 2 and why in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
