"""validation/harness_variants.py edits a problem folder's harness into sibling folders, or refuses; and
validation/harness_bisect_table.py tabulates the bisect's run documents."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "validation" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(tmp_path: Path, harness: str) -> Path:
    problem = tmp_path / "problems" / "toy" / "qr"
    problem.mkdir(parents=True)
    (problem / "eval.py").write_text(harness)
    (problem / "task.yml").write_text('files:\n  - {"name": "eval.py", "source": "eval.py"}\n')
    return problem


def test_each_variant_is_a_sibling_folder_with_one_edit(tmp_path):
    edits = _load("harness_variants").EDITS
    harness = (
        "def bench():\n    " + edits["inproc"][0] + "\n\ndef run():\n" + edits["nowarmup"][0]
        + "    " + edits["norecheck"][0] + "\n\ndef one():\n" + edits["emptycache"][0]
    )  # fmt: skip
    problem = _folder(tmp_path, harness)
    proc = subprocess.run([sys.executable, str(ROOT / "validation" / "harness_variants.py"), str(problem)],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(problem.with_name(f"qr_{name}")) for name in edits]
    for name, (old, new) in edits.items():
        text = (problem.with_name(f"qr_{name}") / "eval.py").read_text()
        assert text == harness.replace(old, new) and text != harness
        assert (problem.with_name(f"qr_{name}") / "task.yml").read_text() == (problem / "task.yml").read_text()
    assert (problem / "eval.py").read_text() == harness  # the published folder is left as it was


def test_a_harness_without_the_edited_line_is_refused(tmp_path):
    problem = _folder(tmp_path, "def bench():\n    return pool.apply(other)\n")
    proc = subprocess.run([sys.executable, str(ROOT / "validation" / "harness_variants.py"), str(problem), "inproc"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 1 and "occurs 0 times" in proc.stderr
    assert not problem.with_name("qr_inproc").exists()
    bad = subprocess.run([sys.executable, str(ROOT / "validation" / "harness_variants.py"), str(problem), "nopool"],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "unknown variant" in bad.stderr


def test_the_table_takes_passed_case_0_runs_by_configuration_and_round(tmp_path):
    def doc(mean, best, passed=True):
        return json.dumps({"run_id": "r", "status": "passed" if passed else "failed", "cases": [
            {"case_idx": 0, "passed": passed, "mean_us": mean, "best_us": best}]})  # fmt: skip

    (tmp_path / "contest-r1.json").write_text(doc(57.1, 39.8))
    (tmp_path / "contest-r2.json").write_text(doc(55.4, 40.7))
    (tmp_path / "tracker-r1.json").write_text(doc(52.4, 34.9))
    (tmp_path / "tracker-r2.json").write_text(doc(51.8, 34.1))
    (tmp_path / "inproc-r1.json").write_text(doc(60.0, 41.0, passed=False))  # a failed case is left out
    (tmp_path / "norecheck-r1.json").write_text("")  # a run cut before it printed
    mod = _load("harness_bisect_table")
    results = mod.read(tmp_path)
    assert set(results) == {"contest", "tracker"}
    rows = mod.table(results).splitlines()
    assert rows[2] == "| contest | 57.1 / 55.4 | 39.8 / 40.7 | 56.2 | 40.2 |"
    assert rows[3] == "| tracker | 52.4 / 51.8 | 34.9 / 34.1 | 52.1 | 34.5 |"
