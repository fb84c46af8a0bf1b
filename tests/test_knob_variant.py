"""scripts/knob_variant.py: the search lists name only family files that exist, and every knob variant they
generate is a contest file whose constants were set (issue 23: kernels/ holds families, not copies)."""

import ast
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

ROOT = Path(__file__).resolve().parents[1]
LISTS = sorted((ROOT / "scripts").glob("search-*.txt"))


@pytest.mark.parametrize("lst", LISTS, ids=lambda p: p.name)
def test_search_list_generates_every_variant(lst, tmp_path):
    out = subprocess.run(
        [sys.executable, "scripts/knob_variant.py", "--list", str(lst), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out, "an empty list"
    for row in out:
        name, _family, _parent, path = row.split()
        src = (ROOT / path).read_text()
        ast.parse(src)
        assert src.startswith("from task import input_t, output_t")
        if Path(path).is_relative_to(tmp_path):
            assert Path(path).stem == name and "# knob (family " in src and "Hypothesis: " in src[:1000]


def test_unknown_knob_is_refused(tmp_path):
    r = subprocess.run(
        [sys.executable, "scripts/knob_variant.py", "kernels/graphed.py", str(tmp_path), "x", "h", "_NO_SUCH=1"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode != 0 and "_NO_SUCH is not one module constant" in r.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("lst", sorted((ROOT / "scripts").glob("fused-*.txt")), ids=lambda p: p.name)
def test_fused_list_variants_and_paths(lst, tmp_path):
    """scripts/h200_fused.sh lists: every VARIANT line writes its file, every run line names a file that exists
    in kernels/ or is written by a VARIANT or SOURCE line of the same list (REPEAT, AFTERPASS, AFTERFAIL and AB
    lines too; a SOURCE line names a run the samples carry), and a BEST line follows a DEV screen."""
    written, screened = set(), False
    runs = duckdb.sql(f"select run_id from read_parquet('{ROOT}/samples/*/runs.parquet')").fetchall()
    sample_runs = {r for (r,) in runs}
    for line in lst.read_text().splitlines():
        words = line.partition("|")[0].split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] in ("REPEAT", "AFTERPASS", "AFTERFAIL"):  # no verdict / only after a passed / a failed run
            words = words[1:]
            assert words and words[0].isdigit() and len(words) >= 4, line
        if words[0] == "SOURCE":  # SOURCE NAME RUN: the stored source of a run the samples carry
            name, run = words[1:]
            assert run in sample_runs, f"{name}: run {run} is in no samples/ folder"
            written.add(f".kscratch/variants/{name}.py")
        elif words[0] == "VARIANT":
            name, family_file, *knobs = words[1:]
            hyp = line.partition("|")[2].strip()
            assert hyp, f"{name}: no hypothesis"
            subprocess.run([sys.executable, "scripts/knob_variant.py", family_file, str(tmp_path), name, hyp, *knobs],
                           cwd=ROOT, check=True, capture_output=True)  # fmt: skip
            written.add(f".kscratch/variants/{name}.py")
            ast.parse((tmp_path / f"{name}.py").read_text())
        elif words[0] == "PAIRED":  # PAIRED NEED CASES REPS ROUNDS PATH[@KNOB=V,...] ...: files and knobs exist
            assert all(w.isdigit() for w in (words[1], words[3], words[4])) and len(words) >= 7, line
            for spec in words[5:]:
                path, _, knobs = spec.partition("@")
                assert path in written or (ROOT / path).is_file(), path
                if (ROOT / path).is_file():
                    tree = ast.parse((ROOT / path).read_text())
                    names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                             if isinstance(t, ast.Name)}  # fmt: skip
                    for knob in filter(None, knobs.split(",")):
                        assert knob.partition("=")[0] in names, f"{spec}: no module constant {knob}"
        elif words[0] == "PROBE":  # PROBE NEED SCRIPT [args]: a script of this repository
            assert words[1].isdigit() and (ROOT / words[2]).is_file(), line
        elif words[0] == "AB":  # AB NEED A B [tracker ab args]: both sides exist or are written above
            assert words[1].isdigit() and len(words) >= 4, line
            for path in words[2:4]:
                assert path in written or (ROOT / path).is_file(), path
        elif words[0] in ("DEV", "BENCH"):
            screened = screened or words[0] == "DEV"
            continue
        elif words[0] == "BEST":  # BEST K NEED FAMILY PARENT: the K-th best of an earlier DEV screen
            assert screened and words[1].isdigit() and words[2].isdigit() and len(words) >= 5, line
        else:
            assert words[1] in written or (ROOT / words[1]).is_file(), words[1]  # GATES PATH or NEED PATH ...
