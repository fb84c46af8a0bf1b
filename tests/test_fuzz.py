"""Fuzzing the two doors to the outside: `import` (random and mutated rows: wrong types, huge strings,
option-looking strings, bad ids) and the dashboard's query parameters (random URLs for run?id=, compare?a=&b=,
regressions?family=&path=). Neither may raise, write outside the store, or change the store when it refuses."""

from __future__ import annotations

import os
import random
import shutil
import string
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from streamlit.testing.v1 import AppTest
from test_safety import fingerprint
from test_store import make_run

from tracker.capture import envinfo
from tracker.store import Store
from tracker.store.transfer import export_runs, import_runs
from tracker.store.validate import InvalidImport

pytestmark = pytest.mark.timeout(300)
NASTY = [
    "--output=/tmp/kb-fuzz-owned", "-p", "--", "../../etc/passwd", "..", "/", "' OR 1=1 --", "\"; DROP TABLE runs;",
    "%00", "\u202e", "x" * 10_000, "", " ", "HEAD", "main", "0" * 40, "*", "?", "\\", "$(touch /tmp/kb-fuzz-owned)",
]  # fmt: skip
TABLES = ("runs", "variants", "variant_names", "case_results", "samples", "verdicts")

values = hs.one_of(
    hs.none(),
    hs.sampled_from(NASTY),
    hs.text(max_size=50),
    hs.text(alphabet=string.hexdigits.lower(), min_size=0, max_size=70),
    hs.integers(min_value=-(2**63), max_value=2**63 - 1),
    hs.floats(allow_nan=True, allow_infinity=True),
    hs.booleans(),
    hs.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 1, 1)).map(lambda d: d.replace(tzinfo=UTC)),
    hs.integers(min_value=1, max_value=300_000).map(lambda n: "y" * n),  # large strings
)
mutations = hs.lists(
    hs.tuples(hs.sampled_from(TABLES), hs.integers(min_value=0, max_value=40), values), min_size=1, max_size=3
)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, Path]:
    """A valid export of two runs (one with a verdict), and a store with a run of its own."""
    root = tmp_path_factory.mktemp("fuzz")
    src, target = root / "src.duckdb", root / "target.duckdb"
    for rec in (make_run("fuzz00000001"), make_run("fuzz00000002", source="# v2\n")):
        assert Store(src).finish_run(rec) is None
    Store(src).add_verdict("fuzz00000001", "promoted", "ok")
    export_runs(src, root / "export")
    assert Store(target).finish_run(make_run("mine00000001")) is None
    return root / "export", target


def _mutate(folder: Path, table: str, col_pick: int, value) -> None:
    path = folder / f"{table}.parquet"
    data = pq.read_table(path)
    name = data.column_names[col_pick % len(data.column_names)]
    try:
        arr = pa.array([value] * data.num_rows)
    except (pa.ArrowException, OverflowError):
        arr = pa.array([repr(value)] * data.num_rows)
    i = data.column_names.index(name)
    pq.write_table(data.set_column(i, pa.field(name, arr.type), arr), path)


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(mutations)
def test_import_of_mutated_rows_never_raises_and_refuses_without_a_change(base, tmp_path_factory, muts):
    export, master = base
    work = tmp_path_factory.mktemp("ex")
    folder, store = work / "export", work / "store.duckdb"
    shutil.copytree(export, folder)
    shutil.copy(master, store)
    for table, col, value in muts:
        _mutate(folder, table, col, value)
    before = fingerprint(store)
    try:
        added = import_runs(store, folder)
    except InvalidImport:
        assert fingerprint(store) == before
    else:
        assert added in (0, 1, 2)
    assert sorted(p.name for p in work.iterdir()) == ["export", "store.duckdb"]  # nothing beside the store
    assert not os.path.exists("/tmp/kb-fuzz-owned")
    shutil.rmtree(work)


# --------------------------------------------------------------------------------------------- URLs


def _random_value(rng: random.Random, ids: list[str]) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return rng.choice(NASTY)
    if kind == 1:
        return rng.choice(ids)[: rng.randrange(1, 13)]  # a real prefix
    if kind == 2:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(0, 40)))
    if kind == 3:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(1, 20)))
    if kind == 4:
        return rng.choice(["householder", "wy", "kernels/householder_torch.py", "(none)", "null", "NaN"])
    return rng.choice(ids)


def test_random_urls_never_raise_nor_write(demo_store, tmp_path, monkeypatch):
    """Random query parameters on the pages that read them. Budget-bound (AppTest renders take ~0.2-1 s)."""
    path, ids = demo_store
    monkeypatch.setenv("KERNELBEAM_SAMPLES_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("KERNELBEAM_OWN_STORE", str(tmp_path / "own.duckdb"))
    monkeypatch.setenv("KERNELBEAM_NO_GPU", "1")
    monkeypatch.chdir(tmp_path)
    envinfo.gpu_available.cache_clear()
    all_ids = ids["householder"] + ids["wy"] + [ids["cpu"]]
    before, listing = fingerprint(path), sorted(os.listdir(tmp_path))
    rng = random.Random(20261130)
    pages = {"pages/run.py": ("id",), "pages/compare.py": ("a", "b"), "pages/regressions.py": ("family", "path")}
    # the same seeded URLs each time: at least the first 12, and more while the budget lasts (a loaded machine
    # rendered only 10 in 10 s)
    n, deadline = 0, time.monotonic() + 10
    while (time.monotonic() < deadline or n < 12) and n < 300:
        page = rng.choice(list(pages))
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
        at.switch_page(page)
        for key in pages[page]:
            if rng.random() < 0.9:
                at.query_params[key] = _random_value(rng, all_ids)
        at.run()
        assert not at.exception, (page, dict(at.query_params), [e.value for e in at.exception])
        n += 1
    print(f"{n} random URLs rendered")
    assert fingerprint(path) == before and sorted(os.listdir(tmp_path)) == listing
    assert not os.path.exists("/tmp/kb-fuzz-owned")
