"""scripts/small_qr_probe.py, the Gluon kernels' test on a GPU: what of it runs without one. Its leaf panels are
laid out as a case lays out a first leaf, and its shape strings are checked before anything loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The probe's leaf outputs for one panel two ways: as the first leaf of 3 x 40 x 40 matrices (H rows 40 long, V and T
# as wide as the outer panel) and as a contiguous panel; both through the tile QR in Triton's interpreter.
_LAYOUTS = """
import sys, torch
sys.path.insert(0, "scripts")
import small_qr_probe as probe
from qr_devbench import load
_, mod = load("kernels/fused_wy.py")
b, m, w, n = probe.parse_leaf("3x40x16x40")
panel = torch.randn((b, m, w), generator=torch.Generator().manual_seed(5))
strided, dense = probe.leaf_outputs(mod, panel, n), probe.leaf_outputs(mod, panel)
assert strided["H"].stride() == (m * n, n, 1) and strided["V"].stride()[1] == mod._outer_width(n)
assert dense["H"].is_contiguous() and strided["VT"].stride()[1] == m
assert all(torch.equal(strided[k], dense[k]) for k in dense), "the layout changed an output"
q = torch.eye(m) - strided["V"] @ strided["T"] @ strided["V"].transpose(1, 2)
err = float((q[:, :, :w] @ torch.triu(strided["H"])[:, :w, :] - panel).abs().max())
assert err < 1e-4, err
print("ok", err)
"""


def test_a_leaf_laid_out_as_in_a_case_gives_the_same_outputs_and_q_times_r_is_the_panel():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", _LAYOUTS], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stderr[-2000:]


def test_a_malformed_leaf_shape_is_one_line_before_the_family_file_loads(tmp_path):
    for bad, says in (("40x352", "is not BxMxW"), ("40x16x32", "W <= M"), ("40x352x16x8", "N >= W")):
        proc = subprocess.run(
            [sys.executable, "scripts/small_qr_probe.py", str(tmp_path / "absent.py"), "--leaves", f"40x48x16,{bad}"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode != 0
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and says in proc.stderr, proc.stderr


def test_a_knob_the_file_lacks_or_a_value_that_is_no_literal_is_one_line():
    for knob, says in (
        ("_NO_SUCH_KNOB", "no constant _NO_SUCH_KNOB"),
        ("_COOP_MIN_BM=two", "not a Python literal"),
        ("_COOP_TAGGED,_NOPE=1", "no constant _NOPE"),
    ):
        proc = subprocess.run(
            [sys.executable, "scripts/small_qr_probe.py", "kernels/fused_wy.py", "--knob", knob],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode != 0
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and says in proc.stderr, proc.stderr
