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


def test_the_gluon_lane_leaf_compiles_unrolled_with_fewer_barriers_than_the_tile_qr():
    """_lane_leaf_kernel (knob _LANE_LEAF) at 40x352's leaf (512 x 16, 8 warps, two lanes a column): no spills, the
    steps unrolled, and fewer barriers in all than the Triton tile QR spends on its 16 steps at that leaf."""
    r = _run("_lane_leaf_kernel", "--ptrs", "src,dst", "--warps", "8", "BM=512", "BW=16", "W=8", "WRITE_VTT=1",
             "SRC_ADDR=0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    leaf = _fields(next(x for x in r.stdout.splitlines() if x.startswith("BM=512")))
    assert leaf["spill_bytes"] == 0 and leaf["loop_SASS"] == 0
    tile = ("BM=512", "BW=16", "WRITE_VT=1", "WRITE_VTT=1", "SKIP_HELD=0", "LEAN=1")
    r = _run("_tile_qr_kernel", "--ptrs", "src,dst", "--warps", "4", *tile)
    assert r.returncode == 0, r.stderr
    step = _fields(next(x for x in r.stdout.splitlines() if x.startswith("BM=512")))["loop_BAR"]
    assert 0 < leaf["BAR"] < 16 * step


def test_the_carry_kernel_fits_two_programs_an_sm_without_spills():
    """_carry_kernel (knob _CARRY) at 2x4096's leaf (64 x 32 rows a program, 128 partial slots) with either kind of
    carried tile, at its _CARRY_WARPS (4): no spills, and registers and shared memory for two programs on an SM (a
    leaf program and a tile beside it; 64K registers, 227 KB shared on the H200)."""
    leaf = ("BM=64", "BW=32", "PP=128", "LEAN=1", "TAGGED=1", "PREC='tf32x2'", "GBN=64", "GBM=64")
    r = _run("_carry_kernel", "--ptrs", "gv_ptr,gx_ptr,gy_ptr", "--warps", "4", *leaf, "KIND=1", "GBK=64",
             "ATOMIC=1", "/", "KIND=2", "GBK=32", "ATOMIC=0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [_fields(x) for x in r.stdout.splitlines() if x.startswith("BM=64")]
    assert len(lines) == 2
    for k in lines:
        assert k["spill_bytes"] == 0 and 2 * k["registers"] * 128 <= 65536 and 2 * k["shared_bytes"] <= 227 * 1024
