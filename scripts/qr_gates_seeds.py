"""Gate check of one variant on every qr_v2 case type at the batch-rich shapes, under hidden seeds (issue 23).

For each case type (the nine of inputs.py), shape and seed: the input from the tracker's generator (case seed
transformed as `run --seed S` does), one call of the variant, the tracker's gates (check_qr). Prints the factor
and orthogonality residuals against their limits; exit status 1 if any case fails.

    python scripts/qr_gates_seeds.py kernels/X.py [--seeds 0,4242,90125] [--shapes 640x512,60x1024]
"""

import argparse
import sys
import time

import torch

sys.path.insert(0, ".")
from tracker.capture.worker import load_variant  # noqa: E402
from tracker.workloads.qr_v2.checks import check_qr  # noqa: E402
from tracker.workloads.qr_v2.inputs import generate  # noqa: E402
from tracker.workloads.qr_v2.suites import Case, hidden_seed  # noqa: E402

TYPES = ["dense", "upper", "rankdef", "nearrank", "clustered", "band", "nearcollinear", "rowscale", "mixed"]


def gate_case(b: int, n: int, typ: str, seed: int) -> Case:
    """The case of type `typ` at b x n that the gate checks make, under hidden seed `seed` (0: none)."""
    cond = 2 if typ in ("dense", "upper", "band", "mixed", "nearcollinear") else 0
    own = 770000 + 17 * TYPES.index(typ) + n
    return Case(b, n, cond, own if seed == 0 else hidden_seed(own, seed), typ)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variant")
    ap.add_argument("--seeds", default="0,4242,90125")
    ap.add_argument("--shapes", default="640x512,60x1024")
    args = ap.parse_args()
    kernel = load_variant(args.variant)
    bad = 0
    t0 = time.time()
    for shp in args.shapes.split(","):
        b, n = (int(x) for x in shp.split("x"))
        for s in (int(x) for x in args.seeds.split(",")):
            for typ in TYPES:
                a = generate(gate_case(b, n, typ, s), device="cuda")
                out = kernel(a)
                torch.cuda.synchronize()
                r = check_qr(a, out)
                bad += not r.passed
                print(f"{shp} seed {s} {typ:13s} {'ok  ' if r.passed else 'FAIL'} {r.message if not r.passed else ''}"
                      f" {r.residuals} [{time.time() - t0:.0f}s]", flush=True)  # fmt: skip
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
