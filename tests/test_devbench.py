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
