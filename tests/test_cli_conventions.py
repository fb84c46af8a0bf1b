"""CLI conventions its users know from pytest-benchmark, asv and hyperfine: help on every option, `--json` on
every command, one readable time unit per table column (microseconds in JSON), median and std beside mean and
err, a progress line that moves within a case, and the `kernelbeam` console script."""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import duckdb
import pytest

from tracker.capture.progress import TerminalBar
from tracker.capture.runner import RunRequest, run_variant
from tracker.cli.common import time_column, time_unit
from tracker.cli.main import build_parser, main
from tracker.store import MIGRATIONS, SCHEMA_VERSION, Store, migrate

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_option_of_every_command_has_help():
    missing = []
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            if not action.help:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"options without help: {missing}"


def test_every_command_takes_json():
    for name, sub in _subparsers(build_parser()).items():
        assert any("--json" in a.option_strings for a in sub._actions), name


@pytest.mark.parametrize(
    "values,unit",
    [
        ([0.25, 0.9], "ns"),
        ([64.2, 0.8, 900.0], "ns"),  # the smallest value decides, so every cell reads >= 1
        ([64.2, 101.0], "us"),
        ([9_847.0, 996_902.0], "ms"),
        ([1_200_000.0, 3_000_000.0], "s"),
        ([None, float("nan")], "us"),
    ],
)
def test_one_unit_per_column_chosen_from_its_values(values, unit):
    assert time_unit(values) == unit


def test_a_time_column_scales_its_cells_and_names_the_unit():
    header, cells = time_column("mean", [9_847.0, 996_902.0, None])
    assert header == "mean (ms)" and cells == ["9.847", "996.9", "-"]


def test_tables_use_scaled_units_and_json_stays_in_microseconds(demo_store, capsys):
    path, ids = demo_store
    run_id = ids["householder"][0]
    assert main(["show", run_id, "--store", str(path)]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("#"))
    for col in ("mean (", "err (", "median (", "std (", "best ("):
        assert col in header, header
    assert main(["show", run_id, "--json", "--store", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    stored = Store(path).case_results(run_id)
    assert [c["mean_us"] for c in doc["cases"]] == pytest.approx(stored["mean_us"].tolist())
    assert {"median_us", "std_us", "err_us"} <= set(doc["cases"][0])


def test_export_and_import_speak_json(demo_store, tmp_path, capsys):
    path, ids = demo_store
    out, other = tmp_path / "exp", tmp_path / "other.duckdb"
    assert main(["export", ids["wy"][0], ids["wy"][1], "--out", str(out), "--json", "--store", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"exported": 2, "out": str(out)}
    assert main(["import", str(out), "--json", "--store", str(other)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["imported"] == 2 and doc["pending_written"] == [] and doc["store"] == str(other)


def test_migration_v3_fills_the_median_of_older_runs_from_their_samples(tmp_path):
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as con:  # a store as the tracker before v3 left it
        con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
        for version in range(2):
            con.execute(MIGRATIONS[version])
            con.execute("INSERT INTO schema_version VALUES (?, now())", [version + 1])
        con.execute(
            "INSERT INTO case_results (run_id, case_idx, spec, kind, passed, mean_us) "
            "VALUES ('r1', 0, 's', 'benchmark', true, 4.0)"
        )
        con.executemany("INSERT INTO samples VALUES ('r1', 0, ?, ?)", [[i, t] for i, t in enumerate([1, 2, 3, 10])])
    with Store(path).connect() as con:
        assert migrate(con) == SCHEMA_VERSION
        assert con.execute("SELECT median_us FROM case_results").fetchone()[0] == 2.5


def test_a_real_run_reports_repetitions_within_a_case_and_records_the_median(tmp_path):
    events: list[dict] = []
    outcome = run_variant(
        RunRequest(
            path=str(ROOT / "kernels" / "geqrf_reference.py"),
            suite="smoke",
            mode="benchmark",
            cases=[0],
            store=str(tmp_path / "runs.duckdb"),
            timeout=240,
        ),
        events.append,
    )
    assert outcome.status == "passed", outcome.record.run.error
    reps = [e for e in events if e["event"] == "rep"]
    assert reps, "no progress within the case"
    done = [e["done"] for e in reps]
    assert done == sorted(done) and all(e["case_eta_s"] >= 0 and e["expected"] >= e["done"] for e in reps)
    case = outcome.record.cases[0]
    assert len(reps) <= case["runs"]  # throttled: never more events than repetitions
    samples = [t for (_, _, t) in outcome.record.samples]
    assert case["median_us"] == pytest.approx(statistics.median(samples))
    assert Store(tmp_path / "runs.duckdb").case_results(outcome.run_id)["median_us"][0] == pytest.approx(
        statistics.median(samples)
    )

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = TerminalBar(stream)
    for event in events:
        bar(event)
    lines = stream.getvalue().split("\r\033[K")
    moving = [line for line in lines if " rep " in line]
    assert moving and "ETA" in moving[0] and "| case " in moving[0] and "| run " in moving[0]


def test_the_kernelbeam_console_script_is_declared_and_points_at_main():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    module, func = project["scripts"]["kernelbeam"].split(":")
    assert getattr(__import__(module, fromlist=[func]), func) is main


def test_the_installed_kernelbeam_command_runs():
    scripts = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "kernelbeam"]
    if not scripts:
        pytest.skip("kernelbeam is not installed here (scripts/install.sh runs `pip install -e .`)")
    exe = Path(sys.executable).parent / "kernelbeam"
    proc = subprocess.run([str(exe), "list", "--limit=-1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "kernelbeam list" in proc.stderr
