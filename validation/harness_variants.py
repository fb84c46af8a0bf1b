"""Patched copies of a GPU Mode problem folder's eval.py, for bisecting what in the contest's harness costs
launch-bound cases their time (issue 19 item 3: the tracker's best repetitions on 20x32 read 3-6 us under the
harness's while both run in the same sandbox; item 4: what the large cases carry from the earlier ones).

    python validation/harness_variants.py PROBLEM_DIR [VARIANT ...]   (default: every variant)

Each variant is written as a sibling folder PROBLEM_DIR_VARIANT, so task.yml's relative sources (`../../x/utils.py`)
still resolve, and its path is printed. The folder is the contest's (never committed); only the edits are ours:
  inproc     benchmarks run in the harness's own process instead of its spawned one-worker pool
  norecheck  the timed loop does not recheck each repetition's outputs (the warm-up already does not)
  nowarmup   no warm-up benchmark of the first case before the timed ones (issue 19 item 4: the contest's 8x2048
             reads about 2.2% slower when 40x176, 40x352 and 60x1024 all ran before it in its process; the
             first of them is also its warm-up case)
  emptycache each benchmark starts from an emptied caching allocator (torch.cuda.empty_cache()), as if no case
             had run before it in the process: whether what carries over is the memory the earlier cases left
An edit whose text is not found exactly once refuses the variant: a changed harness is reported, not half-patched.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

EDITS = {
    "inproc": (
        "return pool.apply(_run_single_benchmark, (test, recheck, max_repeats, max_time_ns))",
        "return _run_single_benchmark(test, recheck, max_repeats, max_time_ns)",
    ),
    "norecheck": (
        "result = run_single_benchmark(pool, test, True, 200, 10e9)",
        "result = run_single_benchmark(pool, test, False, 200, 10e9)",
    ),
    "nowarmup": (
        "    run_single_benchmark(pool, tests[0], False, 200, 10e7)\n",
        "",
    ),
    "emptycache": (
        "    data_list = _make_data_batch(test, _benchmark_batch_count(test))\n",
        "    torch.cuda.empty_cache()\n    data_list = _make_data_batch(test, _benchmark_batch_count(test))\n",
    ),
}


def write_variant(problem: Path, name: str) -> Path:
    old, new = EDITS[name]
    text = (problem / "eval.py").read_text()
    if text.count(old) != 1:
        raise ValueError(f"{problem / 'eval.py'}: {old!r} occurs {text.count(old)} times, not once")
    dest = problem.with_name(f"{problem.name}_{name}")
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(problem, dest)
    (dest / "eval.py").write_text(text.replace(old, new))
    return dest


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    problem, names = Path(argv[0]), argv[1:] or list(EDITS)
    unknown = [n for n in names if n not in EDITS]
    if unknown or not (problem / "eval.py").is_file():
        print(f"unknown variant {unknown} or no eval.py in {problem}", file=sys.stderr)
        return 2
    try:
        for name in names:
            print(write_variant(problem, name))
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
