"""Store(path) and the typed run record: the run row's fields are the runs table's columns, the write path takes
and the side files give back a RunRecord with a RunRow, and every read is a method of Store (none by name)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from test_store import make_run

from tracker.store import TABLE_COLUMNS, RunRecord, RunRow, Store, read_side_file
from tracker.store.reads import boards, cases, history, profiles, runs, variants, verdicts
from tracker.store.sidefiles import save_side_file

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parent.parent
READ_MIXINS = (
    runs.RunReads,
    cases.CaseReads,
    history.HistoryReads,
    variants.VariantReads,
    verdicts.VerdictReads,
    profiles.ProfileReads,
    boards.BoardReads,
)


def test_the_run_row_has_exactly_the_columns_of_the_migrated_runs_table(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    with store.connect() as con:  # a writer open migrates a new file to the current schema
        sql = "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'"
        columns = [r[0] for r in con.execute(sql).fetchall()]
    fields = list(RunRow.__dataclass_fields__)
    assert fields == list(TABLE_COLUMNS["runs"])
    assert sorted(fields) == sorted(columns)


def test_a_run_row_takes_only_its_own_fields():
    row = RunRow(run_id="r1", status="running")
    row.update(status="passed", geomean_us=1.5)
    row.update({"gpu": "CPU"})
    assert (row.status, row.geomean_us, row.gpu) == ("passed", 1.5, "CPU")
    with pytest.raises(TypeError, match="no such run field: statu"):
        row.update(statu="passed")
    with pytest.raises(TypeError):
        RunRow(**{"run_id": "r1", "colour": "red"})
    with pytest.raises(TypeError, match="an object"):
        RunRow.from_dict(["r1"])
    assert RunRow.from_dict(row.as_dict()) == row


def test_the_write_path_records_the_typed_row_and_a_side_file_gives_it_back(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    record = make_run("typed0000001")
    assert isinstance(record.run, RunRow)
    assert store.finish_run(record) is None
    got = store.get_run("typed0000001")
    for name in ("run_id", "variant_sha256", "variant", "status", "suite", "mode", "gpu", "geomean_us", "problem"):
        assert got[name] == getattr(record.run, name), name
    assert store.list_runs()["run_id"].tolist() == ["typed0000001"]
    assert len(store.case_results("typed0000001")) == 2 and len(store.run_samples("typed0000001")) == 10

    kept = save_side_file(store.path, make_run("typed0000002"), "the store stayed locked")
    back = read_side_file(kept.path)
    assert isinstance(back, RunRecord) and isinstance(back.run, RunRow) and back.run.run_id == "typed0000002"
    assert store.pending_run_ids() == {"typed0000002"}
    listed = store.list_runs().set_index("run_id")["status"].to_dict()
    assert listed == {"typed0000001": "passed", "typed0000002": "pending"}  # a pending run is listed from its file
    assert store.get_run("typed0000002")["side_file"] == str(kept.path)
    assert store.flush_pending().written == ["typed0000002"]
    assert store.count_runs() == 2 and not store.pending_run_ids()


def test_a_store_opens_nothing_until_asked_and_reports_a_missing_file_when_read(tmp_path):
    store = Store(tmp_path / "none.duckdb")
    assert not Path(store.path).exists() and store.count_runs() == 0
    with pytest.raises(FileNotFoundError):
        store.check()
    with pytest.raises(FileNotFoundError):
        store.get_run("x")
    store.check(write=True)  # a missing file in a writable folder: fine for a writer
    assert store.pending_dir == Path(f"{store.path}.pending")
    assert store.traces_dir("r1") == Path(f"{store.path}.traces") / "r1"


def test_every_read_is_a_method_of_store_with_the_path_as_its_only_state():
    names = [n for mixin in READ_MIXINS for n, f in vars(mixin).items() if inspect.isfunction(f)]
    assert len(names) == len(set(names)), "two read modules define the same read"
    for name in names:
        assert getattr(Store, name) is next(vars(m)[name] for m in READ_MIXINS if name in vars(m))
        params = list(inspect.signature(getattr(Store, name)).parameters)
        assert params[0] == "self" and "store" not in params, name


def test_the_dashboard_reads_through_store_methods_not_names():
    """Pages pass Store methods to the cache (common.read(Store.x, ...)); a string would escape lint and renames."""
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in (
                "read",
                "try_read",
            ):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant):
                    pytest.fail(f"{path.name}:{node.lineno} reads the store by the name {first.value!r}")
                if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
                    assert first.value.id == "Store" and hasattr(Store, first.attr), f"{path.name}:{node.lineno}"
