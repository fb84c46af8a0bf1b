"""scripts/qr_devbench.py, the H200 call scripts' screen: on the CPU its gates (the tracker's own) judge each case,
a knob set after `@` reaches the module, and its JSON has what scripts/h200_fused.sh ranks by."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_screen_judges_with_the_tracker_gates_and_writes_what_the_ranking_reads(tmp_path):
    wrong = tmp_path / "wrong.py"
    # tau halved: Q is wrong, the factor gate fails
    wrong.write_text(
        "import torch\n\n\ndef custom_kernel(data):\n    h, tau = torch.geqrf(data)\n    return h, tau / 2\n"
    )
    out = tmp_path / "dev.json"
    proc = subprocess.run(
        [sys.executable, "scripts/qr_devbench.py", "--suite", "test", "--cases", "0,7", "kernels/geqrf_reference.py",
         "kernels/fused_wy.py@_SMALL_MAX=0,_NB_TORCH=16", str(wrong), "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        # PyTorch routes on the CPU: test_kernels_smoke sets TRITON_INTERPRET for this process, and 16x512 through
        # the Triton interpreter takes minutes
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert list(res) == ["kernels/geqrf_reference.py", "kernels/fused_wy.py@_SMALL_MAX=0,_NB_TORCH=16", str(wrong)]
    good, knobbed, bad = res.values()
    assert [(r["case"], r["shape"], r["kind"], r["ok"]) for r in good] == [(0, "20x32", "dense", True),
                                                                          (7, "16x512", "rankdef", True)]  # fmt: skip
    assert all(r["ok"] and r["factor"] < 20 and r["orth"] < 100 for r in knobbed)
    assert not any(r["ok"] for r in bad) and "gate failed" in bad[0]["msg"]
    assert "FAIL " + str(wrong) in proc.stdout


def _paired_screen():
    import importlib.util

    spec = importlib.util.spec_from_file_location("paired_screen", ROOT / "scripts" / "paired_screen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_paired_screen_judges_each_round_against_its_own_baseline():
    mod = _paired_screen()
    assert [mod.round_order(["a", "b", "c"], k) for k in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"],
    ]  # fmt: skip

    def row(case, mean, best, ok=True):
        return {"case": case, "shape": "640x512", "ok": ok, "mean_us": mean, "best_us": best}

    # the machine drifts 10% between rounds; the variant is 5% and then 10% faster than the baseline beside it
    rounds = [
        {"base": [row(3, 100.0, 90.0)], "v": [row(3, 95.0, 90.0)]},
        {"base": [row(3, 110.0, 100.0)], "v": [row(3, 99.0, 95.0)]},
        {"base": [row(3, 100.0, 90.0)], "v": [row(3, 50.0, 40.0, ok=False)]},  # a failed check is left out
        {"v": [row(3, 10.0, 10.0)]},  # the baseline's process died: no pair
    ]
    (s,) = mod.summarise(rounds, ["base", "v"])
    assert s["rounds"] == 2 and s["faster_rounds"] == 2
    assert abs(s["mean_ratio"] - (0.95 * 0.90) ** 0.5) < 1e-12 and (s["mean_low"], s["mean_high"]) == (0.9, 0.95)
    assert abs(s["best_ratio"] - 0.95**0.5) < 1e-12


def test_the_paired_screen_runs_each_variant_in_its_own_process_per_round(tmp_path):
    out = tmp_path / "paired.json"
    proc = subprocess.run(
        [sys.executable, "scripts/paired_screen.py", "--cases", "0", "--reps", "2", "--rounds", "2",
         "kernels/geqrf_reference.py", "kernels/fused_wy.py@_SMALL_MAX=0,_NB_TORCH=16", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert [len(r) for r in doc["rounds"]] == [2, 2]
    assert all(rows[0]["ok"] for r in doc["rounds"] for rows in r.values())  # the gates judged every process
    order = [line.split(": ")[1].split()[0] for line in proc.stdout.splitlines() if line.startswith("round ")]
    assert order == [doc["variants"][0], doc["variants"][1], doc["variants"][1], doc["variants"][0]]
    # on the CPU nothing is timed, so nothing is ranked, and the screen says so
    assert doc["summary"] == [] and "no timed case" in proc.stdout
