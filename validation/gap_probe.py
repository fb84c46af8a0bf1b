"""What between two timed repetitions changes the next one's time? An in-process probe on one GPU (issue 19).

The tracker's worker reads 640x512 2-4% slower than the contest's harness (H200, 2026-12-01) while the loop
itself is the harness's; this times qr_v2 cases 4 (60x1024) and 10 (640x512), N repetitions each, with one thing
the tracker does between repetitions added at a time:
  harness   first-pass outputs alive into repetition 0, one in-process check per repetition
  tracker   first pass released before repetition 0, two in-process checks per repetition
  other     harness + another process doing GPU work between repetitions (a stand-in for the checker)
  idle      harness + 0.5 s of idle GPU between repetitions
  otherfp   harness, with the other process busy once, just before repetition 0
  handoff   harness + the outputs packed into the worker's memfd and copied back to the GPU (handoff.py)
  nvml      harness + the runner's NVML sampler (gpustate.Sampler) reading the GPU throughout
  route     the worker's gap as it is: the outputs handed to a checker process (memfd, as handoff.py does) that
            judges them while this process does its own check, then the wait for the verdict
  routeonly route without this process's own check (the checker's check alone fills the gap)

    python validation/gap_probe.py KERNEL_FILE [REPS] [CASES] [VARIANTS] [PROBLEM_DIR]
    e.g. 25 4,10 harness,idle,harness; with PROBLEM_DIR (a GPU Mode folder) every check is the folder's own
    check_implementation, as in the tracker's problem-folder route and in the contest's harness
    (prints one JSON line per case and variant; defaults: 25 repetitions, cases 4 and 10, every variant)

Measured (H200, fused_wy_ltr, 25 repetitions; means in us): case 4 harness 5,627 / idle 5,706; case 10 harness
6,492 / idle 6,735 / other 6,462 / tracker 6,450: idle GPU time between repetitions is what costs.
"""

import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.getcwd())
from tracker.capture import gpustate, handoff  # noqa: E402
from tracker.capture.timing import Clock, clone_data  # noqa: E402
from tracker.capture.worker import load_variant  # noqa: E402
from tracker.common.samplestats import stats  # noqa: E402
from tracker.workloads import for_suite  # noqa: E402

OTHER = r"""
import sys, torch
dev = torch.device("cuda")
a = torch.randn(64, 1024, 1024, device=dev)
for line in sys.stdin:
    for _ in range(int(line)):
        b = torch.bmm(a, a)
    torch.cuda.synchronize()
    del b
    sys.stdout.write("ok\n"); sys.stdout.flush()
"""


CHECKER = r"""
import socket, sys, torch
sys.path.insert(0, sys.argv[1])
from tracker.capture import handoff
from tracker.workloads import for_suite
workload, suite = for_suite(sys.argv[3], None if sys.argv[2] == "-" else sys.argv[2])
dev = torch.device("cuda")
inputs = workload.benchmark_inputs(suite.benchmarks[int(sys.argv[4])], dev)
sock, receiver = socket.socket(fileno=int(sys.argv[5])), handoff.Receiver(dev)
sock.sendall(b'{"ready": true}')
while True:
    message, fd = handoff.recv(sock)
    if message is None:
        break
    outputs = receiver.unpack(message["outputs"], fd, 1 << 40)
    passed = workload.check_outputs(inputs, outputs).passed
    del outputs
    handoff.send(sock, {"passed": passed})
"""


class Checker:
    """A stand-in for the tracker's checker process: its own CUDA context, the case's inputs made there, and a
    verdict on each repetition's outputs sent over a socket with their memfd (tracker/capture/checker.py)."""

    def __init__(self, problem: str, suite: str, case_idx: int) -> None:
        self.sock, theirs = handoff.pair()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHECKER, os.getcwd(), problem or "-", suite, str(case_idx), str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        handoff.recv(self.sock)  # ready: its inputs are made

    def submit(self, sender, outputs):
        header, fd = sender.pack(outputs)
        handoff.send(self.sock, {"outputs": header}, fd)
        return lambda: handoff.recv(self.sock)[0]

    def close(self) -> None:
        self.sock.close()
        self.proc.wait()


class Other:
    """Another process with its own CUDA context that does GPU work on request and says when it is done."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", OTHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.busy(1)

    def busy(self, n: int = 40) -> None:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        self.proc.stdout.readline()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def time_variant(kernel, workload, inputs, copies, clock, variant: str, reps: int, other: Other, checker=None):
    """One case's repetitions as the harness times them, with the variant's extra step between repetitions."""
    sender, receiver = handoff.Sender(inputs[0].device), handoff.Receiver(inputs[0].device)
    sampler = gpustate.Sampler("0").start() if variant == "nvml" else None
    held = [kernel(clone_data(x)) for x in inputs]  # the untimed pass, alive into repetition 0 as in the harness
    workload.check_outputs(copies, held)
    if variant == "tracker":
        held = None
    if variant == "otherfp":
        other.busy()

    def calls() -> list:
        nonlocal held
        outputs = [kernel(x) for x in inputs]
        held = None  # released inside the timed window
        return outputs

    samples = []
    for _ in range(reps):
        seconds, outputs = clock.time_loop(calls)
        if variant in ("route", "routeonly"):
            verdict = checker.submit(sender, outputs)
            if variant == "route":
                workload.check_outputs(copies, outputs)
            verdict()
        else:
            workload.check_outputs(copies, outputs)
        if variant == "tracker":
            workload.check_outputs(copies, outputs)
        elif variant == "other":
            other.busy()
        elif variant == "idle":
            time.sleep(0.5)
        elif variant == "handoff":
            header, fd = sender.pack(outputs)
            receiver.unpack(header, fd, 1 << 40)
        held = outputs
        del outputs
        samples.append(seconds / len(inputs) * 1e6)
    if sampler is not None:
        sampler.stop()
    sender.close()
    receiver.close()
    return samples


VARIANTS = ("harness", "tracker", "other", "idle", "otherfp", "handoff", "nvml", "route", "routeonly", "harness")


def main() -> None:
    kernel = load_variant(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    cases = [int(c) for c in sys.argv[3].split(",")] if len(sys.argv) > 3 else [4, 10]
    variants = sys.argv[4].split(",") if len(sys.argv) > 4 else VARIANTS
    problem = sys.argv[5] if len(sys.argv) > 5 else None
    suite_name = os.path.basename(os.path.normpath(problem)) if problem else "qr_v2"
    workload, suite = for_suite(suite_name, problem)
    dev = torch.device("cuda")
    clock = Clock(dev)
    other = Other()
    out = {}
    for idx in cases:
        inputs = workload.benchmark_inputs(suite.benchmarks[idx], dev)
        copies = [clone_data(x) for x in inputs]
        for _ in range(3):  # warm-up (compile, graphs)
            [kernel(clone_data(x)) for x in inputs]
        torch.cuda.synchronize()
        for variant in variants:
            checker = Checker(problem, suite_name, idx) if variant.startswith("route") else None
            t0 = time.perf_counter()
            samples = time_variant(kernel, workload, inputs, copies, clock, variant, reps, other, checker)
            if checker is not None:
                checker.close()
            st = stats(samples)
            row = {
                "case": idx, "variant": variant, "first": [round(x) for x in samples[:4]],
                "median": round(st.median), "mean": round(st.mean), "std": round(st.std), "best": round(st.best),
                "worst": round(st.worst), "wall_per_rep_s": round((time.perf_counter() - t0) / reps, 3),
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            out.setdefault(idx, []).append(row)
    other.close()
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "gap_probe.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
