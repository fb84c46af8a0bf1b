"""What a Triton kernel of a family file compiles to on the H200, without a GPU: registers, spill bytes and counts
of the SASS instructions that cost a step its latency (barriers, shuffles, shared-memory stores and loads), in
the whole kernel and inside its loops (loop_*), and the layout conversions inside its loops.

Sessions kept doing this by hand to reason about a knob before spending device time on it. Triton compiles for a
target it is given (sm_90a here) and its wheel carries ptxas and cuobjdump, so all of it runs on a CPU machine. Use
the Triton the GPU machine has (3.6 on the H200: `pip install triton==3.6.0` into a scratch environment) to see
what it will run; another version prints its own code generation.

    python scripts/sass_report.py kernels/fused_wy.py _tile_qr_kernel --ptrs src,dst --warps 8 \\
        BM=512 BW=16 WRITE_VT=1 WRITE_VTT=1 SKIP_HELD=0 LEAN=0 / LEAN=1

Arguments: FILE KERNEL, then constexpr settings (K=V, Python literals; a constexpr with a default may be left
out); `/` starts another setting, which inherits the previous one's values. Parameters named *_ptr or listed in
--ptrs are float32 pointers, the other non-constexpr ones 32-bit integers; all pointers and integers get the
16-byte divisibility the contest's inputs give them.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import tempfile

# Compiling for a GPU target is the point: Triton's interpreter (left set by a CPU test run, say) would hand back
# interpreted functions that compile to nothing.
os.environ.pop("TRITON_INTERPRET", None)

# SASS opcodes per class: what a latency-bound step spends its time waiting on, and the tensor-core products
# (HGMMA: Hopper's warpgroup MMA; HMMA: the warp-level one) that say where tl.dot landed
COUNTED = {
    "BAR": r"\bBAR\.", "SHFL": r"\bSHFL\.", "STS": r"\bSTS\b", "LDS": r"\bLDS\b", "ATOM": r"\bATOMG?\b|\bRED\b",
    "HGMMA": r"\bHGMMA\.", "HMMA": r"\bHMMA\.",
}  # fmt: skip
_SASS_LINE = re.compile(r"^\s+/\*([0-9a-f]{4,6})\*/\s+(.*?);")
_BRANCH = re.compile(r"\bBRA\s+0x([0-9a-f]+)")


def load_kernel(path: str, name: str):
    """The @triton.jit (or @gluon.jit) function `name` of a family file, imported without running its contest
    shim (`task`)."""
    with open(path) as f:
        src = f.read()
    src = src.replace("from task import input_t, output_t", "input_t = output_t = object", 1)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, prefix="sass_") as f:
        f.write(src)  # Triton wants a file it can read the kernel's source from, while the process lives
    atexit.register(os.unlink, f.name)
    spec = importlib.util.spec_from_file_location(os.path.basename(f.name)[:-3], f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not hasattr(mod, name):
        raise SystemExit(f"{path}: no kernel {name}")
    return getattr(mod, name)


def with_defaults(kernel, const: dict) -> dict:
    """The settings given, then the defaults of the constexprs not given (a knob added with a default that keeps
    the kernel as it was needs no setting)."""
    params = inspect.signature(kernel.fn).parameters
    defaults = {n: p.default for n, p in params.items() if n not in const and p.default is not inspect.Parameter.empty}
    return {**const, **defaults}


def signature(kernel, ptrs: set[str], const: dict) -> dict[str, str]:
    params = inspect.signature(kernel.fn).parameters
    unknown = set(const) - set(params)
    if unknown:
        raise SystemExit(f"{kernel.fn.__name__} has no parameter {', '.join(sorted(unknown))}")
    sig = {}
    for name, p in params.items():
        if "constexpr" in str(p.annotation):
            if name not in const:
                raise SystemExit(f"constexpr {name} needs a value (NAME=VALUE)")
            sig[name] = "constexpr"
        else:
            sig[name] = "*fp32" if name.endswith("_ptr") or name in ptrs else "i32"
    return sig


def sass_counts(sass: str) -> dict[str, int]:
    """Counts over the whole kernel, then the same over the bodies of its loops (a backward branch's range; nested
    ranges counted once): what one step of a loop waits on is what its latency is made of."""
    ops = [(int(m.group(1), 16), m.group(2)) for line in sass.splitlines() if (m := _SASS_LINE.match(line))]
    spans = []
    for at, op in ops:
        b = _BRANCH.search(op)
        if b and int(b.group(1), 16) < at:  # backward: a loop (the trap at the end branches to itself)
            spans.append((int(b.group(1), 16), at))
    in_loop = [op for at, op in ops if any(lo <= at <= hi for lo, hi in spans)]
    out = {"SASS": len(ops)}
    out.update({k: sum(1 for _, op in ops if re.search(p, op)) for k, p in COUNTED.items()})
    out["loop_SASS"] = len(in_loop)
    out.update({f"loop_{k}": sum(1 for op in in_loop if re.search(p, op)) for k, p in COUNTED.items() if k != "ATOM"})
    return out


def report(kernel, sig: dict, const: dict, warps: int, arch: int = 90) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t != "constexpr"}
    try:  # a Gluon kernel (explicit layouts) compiles from its own source object
        from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
    except ImportError:
        GluonASTSource = GluonJITFunction = None
    make = GluonASTSource if GluonJITFunction and isinstance(kernel, GluonJITFunction) else ASTSource
    src = make(kernel, sig, constexprs=const, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": warps})
    tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        log = subprocess.run([os.path.join(tools, "ptxas"), "-v", "--gpu-name", gpu, ptx, "-o", cubin],
                             capture_output=True, text=True, check=True).stderr  # fmt: skip
        sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout  # fmt: skip
    ttgir = compiled.asm["ttgir"]
    loops = re.findall(r"scf\.(?:for|while)[\s\S]*?scf\.(?:yield|condition)", ttgir)
    return {
        "registers": int(re.search(r"Used (\d+) registers", log).group(1)),
        "spill_bytes": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
        "shared_bytes": compiled.metadata.shared,  # a program's shared memory: how many fit an SM beside others
        **sass_counts(sass),
        "loop_converts": sum(loop.count("convert_layout") for loop in loops),
    }


def settings(items: list[str]) -> list[dict]:
    """K=V groups separated by "/", each inheriting the previous group's values."""
    groups, cur = [], {}
    for item in [*items, "/"]:
        if item == "/":
            groups.append(dict(cur))
            continue
        key, sep, val = item.partition("=")
        if not sep:
            raise SystemExit(f"not NAME=VALUE: {item}")
        cur[key] = ast.literal_eval(val)
    return [g for g in groups if g]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("kernel")
    ap.add_argument("const", nargs="*", help="NAME=VALUE ... [/ NAME=VALUE ...]")
    ap.add_argument("--ptrs", default="", help="pointer parameters not named *_ptr, comma-separated")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--arch", type=int, default=90, help="compute capability x10 (default 90: H100/H200)")
    args = ap.parse_intermixed_args(argv)  # settings may follow the options
    kernel = load_kernel(args.file, args.kernel)
    ptrs = set(filter(None, args.ptrs.split(",")))
    import triton

    print(f"{args.kernel} from {args.file}, sm_{args.arch}, {args.warps} warps, triton {triton.__version__}")
    for given in settings(args.const) or [{}]:
        const = with_defaults(kernel, given)
        sig = signature(kernel, ptrs, const)
        r = report(kernel, sig, const, args.warps, args.arch)
        shown = " ".join(f"{k}={v}" for k, v in given.items())
        print(f"{shown}: " + ", ".join(f"{k} {v}" for k, v in r.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
