"""scripts/sass_report.py on a real family file: Triton compiles for sm_90a and its own ptxas and cuobjdump read
the result, all on the CPU machine the tests run on."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "sass_report.py")
FAMILY = os.path.join(ROOT, "kernels", "fused_wy.py")


def _run(*args):
    return subprocess.run([sys.executable, SCRIPT, FAMILY, *args], capture_output=True, text=True, timeout=300)


def test_two_settings_of_the_tile_qr_kernel_report_registers_and_sass_counts():
    tile = ("BM=32", "BW=32", "WRITE_VT=0", "WRITE_VTT=0", "SKIP_HELD=0")
    r = _run("_tile_qr_kernel", "--ptrs", "src,dst", "--warps", "2", *tile, "LEAN=0", "/", "LEAN=1")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith("BM=32")]
    assert [x.split(":")[0].split()[-1] for x in lines] == ["LEAN=0", "LEAN=1"]  # the second inherits BM..WRITE_VTT
    for line in lines:
        fields = dict(f.rsplit(" ", 1) for f in line.split(": ", 1)[1].split(", "))
        assert 0 < int(fields["registers"]) <= 255 and int(fields["SASS"]) > 100
        assert int(fields["BAR"]) > 0 and int(fields["SHFL"]) > 0  # the step's cross-warp and in-warp reductions
        # the column step is the kernel's one loop, and every exchange between warps happens in it
        assert 0 < int(fields["loop_SASS"]) < int(fields["SASS"]) and fields["loop_BAR"] == fields["BAR"]
    # the lean step is fewer instructions for the same tile (the point of the knob)
    sass = [int(dict(f.rsplit(" ", 1) for f in x.split(": ", 1)[1].split(", "))["SASS"]) for x in lines]
    assert sass[1] < sass[0]


def test_bad_input_is_refused_with_a_reason():
    r = _run("_no_such_kernel")
    assert r.returncode != 0 and "no kernel _no_such_kernel" in r.stderr
    r = _run("_tile_qr_kernel", "--ptrs", "src,dst", "BM=32")
    assert r.returncode != 0 and "constexpr BW needs a value" in r.stderr
    r = _run("_tile_qr_kernel", "--ptrs", "src,dst", "BM=32", "BOGUS=1")
    assert r.returncode != 0 and "no parameter BOGUS" in r.stderr


def _fields(line: str) -> dict[str, int]:
    return {k: int(v) for k, v in (f.rsplit(" ", 1) for f in line.split(": ", 1)[1].split(", "))}


def test_the_one_warp_gluon_kernel_exchanges_only_by_shuffles_and_only_rows_it_still_needs():
    """kernels/fused_wy.py's _lane_qr_kernel (knob _SMALL_LANES) runs only on a GPU (the interpreter does not run
    Gluon); what its design promises is checked in its SASS: no shared memory, no barrier, and column j shuffled
    only for rows j..31 (32 + 31 + ... + 1 shuffles), fewer instructions in all than the Triton tile QR runs."""
    r = _run("_lane_qr_kernel", "--ptrs", "src,dst", "--warps", "1", "N=32", "SPLIT=1", "/", "SPLIT=0")
    assert r.returncode == 0, r.stderr
    lanes = [_fields(x) for x in r.stdout.splitlines() if x.startswith("N=32")]
    assert len(lanes) == 2  # the row sums as four chains (the default) and as one
    for lane in lanes:
        assert lane["spill_bytes"] == 0 and lane["registers"] <= 255
        assert lane["BAR"] == lane["STS"] == lane["LDS"] == 0
        assert lane["SHFL"] == sum(range(1, 33))
        assert lane["loop_SASS"] == 0  # the steps unrolled: every row test known when compiled
    tile = ("BM=32", "BW=32", "WRITE_VT=0", "WRITE_VTT=0", "SKIP_HELD=0", "LEAN=1")
    r = _run("_tile_qr_kernel", "--ptrs", "src,dst", "--warps", "2", *tile)
    assert r.returncode == 0, r.stderr
    step = _fields(next(x for x in r.stdout.splitlines() if x.startswith("BM=32")))["loop_SASS"]
    assert all(lane["SASS"] < 32 * step for lane in lanes)


def test_the_cooperative_leaf_at_four_warps_spills_nothing():
    """_coop_leaf_kernel at 2x4096's leaf (64 x 32 a program, 64 programs a matrix), at the 4 warps it runs with
    (_COOP_WARPS; 12% faster on 2x4096 than 2 warps, session 55): no spills, and fewer registers than at 2 warps,
    where its tile sits in half the threads."""
    leaf = ("BM=64", "BW=32", "PP=64", "LEAN=1", "TAGGED=1", "SKIP_HELD=0")
    got = {}
    for warps in ("2", "4"):
        r = _run("_coop_leaf_kernel", "--warps", warps, *leaf)
        assert r.returncode == 0, r.stderr
        (line,) = [x for x in r.stdout.splitlines() if x.startswith("BM=64")]
        got[warps] = _fields(line)
    assert got["4"]["spill_bytes"] == 0
    assert got["4"]["registers"] < got["2"]["registers"]


def test_the_fused_trailing_update_runs_on_warpgroup_mma_without_spills():
    """The batch-rich shapes' fused update (_wy_fused_vt_kernel, 64 x 64 tiles, tf32x2, 4 warps): its products in
    both loops are Hopper warpgroup MMA, not the older per-warp MMA, and its 250-odd registers do not spill."""
    tile = ("BM=64", "BN=64", "BK=64", 'PREC="tf32x2"', "STAGES=3", "SRC_ADDR=0")
    r = _run("_wy_fused_vt_kernel", "--warps", "4", *tile)
    assert r.returncode == 0, r.stderr
    (line,) = [_fields(x) for x in r.stdout.splitlines() if x.startswith("BM=64")]
    assert line["loop_HGMMA"] >= 2 and line["HMMA"] == 0 and line["spill_bytes"] == 0
    assert line["HGMMA"] > line["loop_HGMMA"]  # the second loop's products too
