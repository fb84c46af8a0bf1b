"""CLI conventions its users know from pytest-benchmark, asv and hyperfine: help on every option, `--json` on
every command, one readable time unit per table column (microseconds in JSON), median and std beside mean and
err, a progress line that moves within a case, and the `kernelbeam` console script."""

from __future__ import annotations

import argparse
import io
import json
import re
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
from tracker.cli.common import time_column, time_columns, time_unit
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


def test_related_time_columns_share_one_unit_chosen_by_the_times_not_the_spreads():
    columns = time_columns([("mean", [9_847.0, 996_902.0]), ("err", [0.4, 2.0]), ("best", [9_800.0, None])],
                           spreads=("err",))  # fmt: skip
    assert columns == [("mean (ms)", ["9.847", "996.9"]), ("err (ms)", ["0.000400", "0.00200"]),
                       ("best (ms)", ["9.800", "-"])]  # fmt: skip


def test_show_and_compare_print_related_times_in_one_unit(tmp_path, capsys):
    """show's mean, err, median, std and best, and compare's A and B means, each in one unit: A's cases in
    microseconds and B's in milliseconds read 'A mean (us)' beside 'A mean (ms)' before."""
    from conftest import BASE_US, T0, kernel_source, make_record

    path = tmp_path / "units.duckdb"
    for run_id, factor in (("fast00000000", 1.0), ("slow00000000", 1000.0)):
        record = make_record(run_id, variant=run_id[:4], source=kernel_source(run_id[:4], 1), path="k/x.py",
                             family=None, started=T0, means=[b * factor for b in BASE_US])  # fmt: skip
        assert Store(path).finish_run(record) is None

    def units(header: str) -> list[str]:
        return re.findall(r"\((ns|us|ms|s)\)", header)

    for run_id, unit in (("fast00000000", "us"), ("slow00000000", "ms")):
        assert main(["show", run_id, "--store", str(path)]) == 0
        lines = capsys.readouterr().out.splitlines()
        header = next(line for line in lines if line.startswith("#"))
        assert units(header) == [unit] * 5, header
        first = lines[lines.index(header) + 1].split()
        err = first[first.index("pass") + 2]
        assert err != "0.000" and float(err) < 1, first  # 20x32's err (0.2%) in the unit of the times
    assert main(["compare", "fast00000000", "slow00000000", "--store", str(path)]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "A mean" in line)
    assert units(header) == ["us", "us"], header


def test_import_results_names_the_geomeans_unit_once(tmp_path, capsys):
    """`import-results` said `geomean 56.97 us us` and `2.024 ms us`: fmt_us carries the unit."""
    from tracker.workloads.qr_v2.suites import QR_V2

    lines = ["check: pass", f"benchmark-count: {len(QR_V2.benchmarks)}"]
    for i, c in enumerate(QR_V2.benchmarks):
        lines += [f"benchmark.{i}.spec: batch: {c.batch}; n: {c.n}; cond: {c.cond:g}; seed: {c.seed}; case: {c.case}",
                  f"benchmark.{i}.runs: 10", f"benchmark.{i}.mean: {2e6 * (i + 1)}"]  # fmt: skip
    log = tmp_path / "b200.log"
    log.write_text("\n".join(lines) + "\n")
    reference = str(ROOT / "kernels" / "geqrf_reference.py")
    args = ["import-results", str(log), "--variant", reference, "--gpu", "NVIDIA B200", "--store", str(tmp_path / "s")]
    assert main(args) == 0
    out = capsys.readouterr().out.strip()
    assert re.search(r"geomean [0-9.,]+ ms$", out), out  # 2 ms to 24 ms per case


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


def test_counts_take_the_noun_they_need():
    from tracker.common.text import counted

    assert [counted(n, "run") for n in (0, 1, 2, 1200)] == ["0 runs", "1 run", "2 runs", "1,200 runs"]
    assert counted(1, "earlier run") == "1 earlier run" and counted(3, "child", "children") == "3 children"


def test_a_run_s_front_imports_neither_pandas_nor_pyarrow(tmp_path):
    """`run` is the command an agent calls most, `verdict` the next. Their fronts (the options, the run id's
    prefix, the dead-end check on a store with a rejected variant, recording the run and its samples) need no
    DataFrame: pandas and pyarrow cost about 0.5 s of
    CPU a process, so they stay unimported there (tracker.common.lazy), while `list` still builds its table."""
    store = tmp_path / "runs.duckdb"
    first = subprocess.run(
        [sys.executable, "-m", "tracker", "run", "kernels/geqrf_reference.py", "--cases", "0", "--store", str(store),
         "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    run_id, first_reps = doc["run_id"], doc["cases"][0]["runs"]

    def front(*args: str) -> set[str]:
        """The modules a command's own process imported (-X importtime is not passed on to a worker or checker)."""
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tracker", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=180)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}

    # a verdict on a run id's prefix (every command that takes a run id resolves it so)
    verdict = front("verdict", run_id[:6], "rejected", "--reason", "planted dead end", "--store", str(store))
    assert Store(store).latest_verdict(Store(store).get_run(run_id)["variant_sha256"]) == "rejected"
    imported = front("run", "kernels/geqrf_reference.py", "--cases", "0", "--store", str(store), "--force")
    assert "tracker.store.writes" in imported and "duckdb" in imported, sorted(imported)[:20]
    for modules in (imported, verdict):
        assert not {"pandas", "pyarrow"} & modules, sorted(m for m in modules if m.startswith(("pandas", "pyarrow")))
    samples = Store(store).run_samples(run_id)  # written without pyarrow, read back as before
    assert len(samples) == first_reps and samples["time_us"].gt(0).all() and samples["rep"].is_unique
