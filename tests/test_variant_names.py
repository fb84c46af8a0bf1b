"""Variant names (issue 21 item 7, `add`): `add` of an unchanged copy records the copy's name (and family) for the
content it shares, and that name resolves wherever a variant name is accepted (`list --variant`, `show`, `compare`,
`leaderboard --gaps --variant`, `ab`, the search of the dashboard's tables); a name of other content is refused; a
changed file keeps its name; stores from before the names table migrate with every name as it resolved; names travel
with export and import, and a crafted export with bad names is refused. Real store files, the real CLI (main() and a
subprocess for the exit code and the one error line)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, T0, make_record
from tracker import store as store_mod
from tracker.cli.main import main
from tracker.common.gitinfo import source_hash
from tracker.store import Store
from tracker.store.transfer import export_runs, import_runs
from tracker.store.validate import InvalidImport

pytestmark = pytest.mark.timeout(120)
BASE = '''"""Baseline: torch.geqrf."""
import torch


def custom_kernel(data):
    return torch.geqrf(data)
'''
CHANGED = BASE.replace("torch.geqrf(data)", "torch.geqrf(data.contiguous())")
SMOKE_MEANS = [40.0, 90.0, 150.0, 260.0]


def call(capsys, *args: str):
    """`python -m tracker ARGS --json` in this process: (exit code, the JSON document)."""
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNELBEAM_NO_GPU": "1"}
    return subprocess.run([sys.executable, "-m", "tracker", *args], capture_output=True, text=True, env=env, timeout=90)


def names(store: Path) -> dict[str, tuple[str, str | None, str | None]]:
    return {n["name"]: (n["sha256"], n["path"], n["family"]) for n in Store(store).variant_names()}


@pytest.fixture
def copied(tmp_path):
    """A store with one passed run of orig.py's content and orig.py registered; twin.py (the same text) beside it."""
    store, orig, copy = tmp_path / "names.duckdb", tmp_path / "orig.py", tmp_path / "twin.py"
    orig.write_text(BASE)
    copy.write_text(BASE)
    record = make_record("firstrun0001", variant="orig", source=BASE, path=str(orig), family=None, started=T0,
                         means=SMOKE_MEANS, suite="smoke")  # fmt: skip
    assert Store(store).finish_run(record) is None
    return store, orig, copy


def test_add_of_an_unchanged_copy_records_its_name_and_family_and_the_name_finds_its_runs(copied, capsys):
    store, orig, copy = copied
    sha = source_hash(BASE)
    code, (row,) = call(capsys, "add", str(copy), "--family", "beam", "--store", str(store))
    assert code == 0
    assert row["variant"] == "twin" and row["sha256"] == sha and row["added"] is False and row["known_as"] == "orig"
    assert row["name_added"] is True and row["name_family"] == "beam"
    assert names(store)["twin"] == (sha, str(copy), "beam") and names(store)["orig"][0] == sha

    # Said in one line; adding the same name again is a no-op ("known").
    assert main(["add", str(copy), "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert f"{copy}: the same content as registered variant orig (family beam); the name twin is recorded" in text
    assert "0 added, 0 named, 1 already registered" in text
    code, (again,) = call(capsys, "add", str(copy), "--family", "other", "--store", str(store))
    assert again["name_added"] is False and names(store)["twin"][2] == "beam"  # a family is not replaced

    # `variants` lists the other names; its documented keys stay.
    code, (listed,) = call(capsys, "variants", "--store", str(store))
    assert listed["variant"] == "orig" and listed["aliases"] == [{"name": "twin", "path": str(copy), "family": "beam"}]
    assert call(capsys, "variants", "--family", "beam", "--store", str(store))[1][0]["sha256"] == sha
    assert main(["variants", "--store", str(store)]) == 0
    assert "twin (beam)" in capsys.readouterr().out

    # The new name resolves everywhere a variant name is accepted.
    assert [r["run_id"] for r in call(capsys, "list", "--variant", "twin", "--store", str(store))[1]] == [
        "firstrun0001"
    ]
    assert call(capsys, "show", "twin", "--store", str(store))[1]["run_id"] == "firstrun0001"
    code, cmp = call(capsys, "compare", "orig", "twin", "--store", str(store))
    assert code == 0 and cmp["a"] == cmp["b"] == "firstrun0001"
    gaps = call(capsys, "leaderboard", "--gaps", "--variant", "twin", "--suite", "smoke", "--store", str(store))[1]
    assert gaps["variant"] == "orig"
    assert Store(store).list_runs(search="twi")["run_id"].tolist() == ["firstrun0001"]  # the dashboards' search
    assert Store(store).variant_table(search="twi")["variant_sha256"].tolist() == [sha]
    assert Store(store).latest_run_of_variant("twin") == "firstrun0001"  # run --parent twin
    # The newest run, whatever its status (a NULL in the ORDER BY had put every run that did not pass first).
    for k, status in enumerate(("timeout", "passed")):
        later = make_record(f"laterrun000{k}", variant="orig", source=BASE, path=str(orig), family=None,
                            started=T0 + timedelta(days=k + 1), suite="smoke", status=status,
                            means=None if status == "timeout" else SMOKE_MEANS)  # fmt: skip
        assert Store(store).finish_run(later) is None
        assert Store(store).latest_run_of_variant("twin") == f"laterrun000{k}"
    assert Store(store).latest_run_of_variant("twin", "smoke", "benchmark") == "laterrun0001"

    from tracker.cli.ab import _target

    folder = store.parent / "ab"
    folder.mkdir()
    target = _target(str(store), "twin", folder)  # `ab twin B` runs the content under the copy's name and file
    assert target["name"] == "twin" and target["recorded_path"] == str(copy)
    assert Path(target["path"]).read_text() == BASE


def test_the_leaderboard_tells_apart_two_sources_run_under_one_name(copied, capsys):
    """A file edited in place (or a repeat written with another docstring) leaves two sources under one name: the
    board lists each once, the source the name stands for under the name, the other as name@sha8, and each row's
    name is accepted back by --gaps."""
    store, orig, _ = copied
    faster = [m * 0.9 for m in SMOKE_MEANS]
    record = make_record("secondrun002", variant="orig", source=CHANGED, path=str(orig), family=None,
                         started=T0 + timedelta(hours=1), means=faster, suite="smoke")  # fmt: skip
    assert Store(store).finish_run(record) is None
    board = call(capsys, "leaderboard", "--suite", "smoke", "--mode", "benchmark", "--store", str(store))[1]
    rows = {v["variant"]: v for v in board["variants"]}
    named = Store(store).resolve_variant_name("orig")
    other = source_hash(CHANGED) if named == source_hash(BASE) else source_hash(BASE)
    assert set(rows) == {"orig", f"orig@{other[:8]}"}
    assert rows["orig"]["sha256"] == named and rows[f"orig@{other[:8]}"]["sha256"] == other
    for name, row in rows.items():
        gaps = call(capsys, "leaderboard", "--gaps", "--variant", name, "--suite", "smoke", "--mode", "benchmark",
                    "--store", str(store))[1]  # fmt: skip
        assert gaps["variant"] == name and gaps["cells_geomean_us"] == pytest.approx(row["best_geomean_us"])
    assert main(["leaderboard", "--suite", "smoke", "--mode", "benchmark", "--store", str(store)]) == 0
    text = capsys.readouterr().out
    assert text.count(f"orig@{other[:8]}") == 1 and text.count("orig ") == 1


def test_a_name_of_other_content_is_refused_and_a_changed_file_keeps_its_name(copied, capsys):
    store, orig, copy = copied
    other = store.parent / "other.py"
    other.write_text(CHANGED)
    before = names(store)
    proc = cli("add", str(other), "--name", "orig", "--store", str(store))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "the name 'orig' is taken" in line and str(orig) in line
    assert names(store) == before and len(Store(store).variant_list()) == 1  # nothing written
    assert cli("add", str(other), "--name", " ", "--store", str(store)).returncode == 2

    # An explicit name for a new file, then the copy's name, then the copy changed: its name moves with it.
    assert call(capsys, "add", str(other), "--name", "wide", "--store", str(store))[1][0]["added"] is True
    assert names(store)["wide"] == (source_hash(CHANGED), str(other), None)
    assert call(capsys, "add", str(copy), "--store", str(store))[1][0]["name_added"] is True
    copy.write_text(BASE.replace("Baseline", "Baseline, edited"))
    code, (row,) = call(capsys, "add", str(copy), "--store", str(store))
    assert row["added"] is True and row["variant"] == "twin"
    assert names(store)["twin"][0] == source_hash(copy.read_text())
    assert call(capsys, "list", "--variant", "twin", "--store", str(store))[1] == []  # its new content has no runs
    assert call(capsys, "list", "--variant", "orig", "--store", str(store))[1][0]["run_id"] == "firstrun0001"


def _v11_store(path: Path) -> dict[str, str]:
    """A store as the tracker before variant names left it: two versions of graphed (the second newer), one other
    variant with a family, a run of each version. Returns name -> the sha256 that name resolved to."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
        for version in range(11):
            con.execute(store_mod.MIGRATIONS[version])
            con.execute("INSERT INTO schema_version VALUES (?, now())", [version + 1])
        rows = [("graphed", "kernels/graphed.py", "a = 1\n", 0, None), ("graphed", "kernels/graphed.py", "a = 2\n", 1,
                None), ("other", "kernels/other.py", "b = 1\n", 2, "beam")]  # fmt: skip
        for k, (name, file, source, hours, family) in enumerate(rows):
            sha, at = source_hash(source), T0 + timedelta(hours=hours)
            con.execute(
                "INSERT INTO variants (sha256, name, path, source, first_seen, family) VALUES (?, ?, ?, ?, ?, ?)",
                [sha, name, file, source, at, family],
            )
            con.execute(
                "INSERT INTO runs (run_id, variant_sha256, variant, path, status, suite, mode, started_at) "
                "VALUES (?, ?, ?, ?, 'passed', 'smoke', 'test', ?)",
                [f"old{k:09d}", sha, name, file, at],
            )
    return {"graphed": source_hash("a = 2\n"), "other": source_hash("b = 1\n")}


def test_a_v11_store_migrates_with_every_name_resolving_as_before(tmp_path, capsys):
    path = tmp_path / "v11.duckdb"
    resolved = _v11_store(path)
    # Read through the Store before any writer migrated it (its reads never migrate): names as they resolved, and
    # the runs `list --variant` shows (the CLI upgrades a store before its first read, so it reads no v11 store).
    assert {n: s for n, (s, _, _) in names(path).items()} == resolved
    unmigrated = Store(path).list_runs(variant="graphed")
    assert sorted(unmigrated["run_id"]) == ["old000000000", "old000000001"]
    with Store(path).connect(read_only=True) as con:
        assert store_mod.schema_version(con) == 11
    # The CLI's read upgrades it first (one line on stderr), and the name still gives both versions' runs.
    assert main(["list", "--variant", "graphed", "--json", "--store", str(path)]) == 0
    out = capsys.readouterr()
    assert out.err == f"upgraded store {path} from schema v11 to v{store_mod.SCHEMA_VERSION}\n"
    assert sorted(r["run_id"] for r in json.loads(out.out)) == ["old000000000", "old000000001"]  # as before
    with Store(path).connect(read_only=True) as con:
        assert store_mod.schema_version(con) == store_mod.SCHEMA_VERSION
    assert names(path) == {
        "graphed": (resolved["graphed"], "kernels/graphed.py", None),
        "other": (resolved["other"], "kernels/other.py", "beam"),
    }
    assert call(capsys, "show", "other", "--store", str(path))[1]["run_id"] == "old000000002"


def test_an_unmigrated_v11_store_boards_each_version_of_a_name_once(tmp_path):
    """A store from before variant names, read (never migrated) by the Leaderboard: graphed's two versions get one
    row each, the name staying with the newer content, as it resolved then."""
    path = tmp_path / "v11.duckdb"
    resolved = _v11_store(path)
    board = Store(path).leaderboard_cells(suite="smoke", mode="test", gpu=None)["variants"]
    rows = dict(zip(board["variant"], board["variant_sha256"], strict=True))
    older = next(sha for sha in board["variant_sha256"] if sha not in resolved.values())
    assert rows == {"graphed": resolved["graphed"], f"graphed@{older[:8]}": older, "other": resolved["other"]}
    assert "latest_at" not in board.columns


def test_names_travel_with_export_and_import_and_an_old_export_still_imports(copied, capsys, tmp_path):
    store, orig, copy = copied
    assert call(capsys, "add", str(copy), "--family", "beam", "--store", str(store))[0] == 0
    folder = tmp_path / "export"
    assert export_runs(store, folder) == 1
    assert pq.read_table(folder / "variant_names.parquet").num_rows == 2
    target = tmp_path / "target.duckdb"
    assert import_runs(target, folder) == 1
    assert names(target) == names(store)
    assert import_runs(target, folder) == 0 and names(target) == names(store)  # nothing twice
    assert [r["run_id"] for r in call(capsys, "list", "--variant", "twin", "--store", str(target))[1]] == [
        "firstrun0001"
    ]
    # An export from before names had a table: its variants' names are recorded as the migration would.
    (folder / "variant_names.parquet").unlink()
    older = tmp_path / "older.duckdb"
    assert import_runs(older, folder) == 1
    assert names(older) == {"orig": (source_hash(BASE), str(orig), "beam")}  # the family `add` gave the variant


BAD_NAMES = [
    ("empty", {"name": ""}, "column name has the invalid value ''"),
    ("blank", {"name": "   "}, "column name has the invalid value '   '"),
    ("overlong", {"name": "x" * 5000}, "'name' is 5,000 characters long"),
    ("unknown content", {"sha256": "f" * 64}, "that variants.parquet does not carry"),
    ("bad sha256", {"sha256": "not-a-hash"}, "column sha256 has the invalid value"),
    ("twice", {"name": "orig"}, "lists the name 'orig' twice"),
]


@pytest.mark.parametrize(("change", "why"), [b[1:] for b in BAD_NAMES], ids=[b[0] for b in BAD_NAMES])
def test_a_crafted_export_with_bad_names_is_refused(copied, tmp_path, change, why):
    store, orig, copy = copied
    assert main(["add", str(copy), "--store", str(store)]) == 0
    folder = tmp_path / "export"
    export_runs(store, folder)
    path = folder / "variant_names.parquet"
    rows = pq.read_table(path).to_pylist()
    i = next(k for k, r in enumerate(rows) if r["name"] == "twin")
    rows[i].update(change)
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    target = tmp_path / "target.duckdb"
    with pytest.raises(InvalidImport, match="variant_names.parquet") as err:
        import_runs(target, folder)
    assert why in str(err.value)
    assert not target.exists()


def test_the_cli_refuses_an_export_with_a_bad_name_in_one_line(copied, tmp_path):
    store, orig, copy = copied
    folder = tmp_path / "export"
    export_runs(store, folder)
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    path = bad / "variant_names.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0]["name"] = ""
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    proc = cli("import", str(bad), "--store", str(tmp_path / "target.duckdb"))
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and "variant_names.parquet, row 0" in line and "column name" in line
