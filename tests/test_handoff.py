"""The output hand-off between worker and checker (tracker.capture.handoff), over a real socket pair and memfds."""

from __future__ import annotations

import fcntl
import os

import pytest
import torch

from tracker.capture import handoff


def _roundtrip(sender, receiver, a, b, outputs):
    header, fd = sender.pack(outputs)
    handoff.send(a, {"outputs": header}, fd)
    message, got = handoff.recv(b)
    try:
        return receiver.unpack(message["outputs"], got, 1 << 30), header
    finally:
        os.close(got)


def test_outputs_cross_exactly_and_the_buffer_is_reused_while_they_fit():
    a, b = handoff.pair()
    sender, receiver = handoff.Sender("cpu"), handoff.Receiver("cpu")
    h = torch.randn(3, 5, 7)
    tau = torch.randn(3, 5)[:, ::2]  # not contiguous: sent as its values
    back, _ = _roundtrip(sender, receiver, a, b, [(h, tau), None, 3])
    assert torch.equal(back[0][0], h) and torch.equal(back[0][1], tau) and back[1:] == [None, 3]
    first = os.fstat(sender._staged.fd).st_ino
    back, _ = _roundtrip(sender, receiver, a, b, [(h[:1], tau[:1])])  # smaller: same memfd
    assert os.fstat(sender._staged.fd).st_ino == first and torch.equal(back[0][0], h[:1])
    big = torch.randn(64, 64, 64)
    back, _ = _roundtrip(sender, receiver, a, b, [(big,)])  # larger: a new one, and the receiver follows
    assert os.fstat(sender._staged.fd).st_ino != first and torch.equal(back[0][0], big)
    sender.close()
    receiver.close()


def test_what_was_judged_is_a_copy_the_worker_cannot_change_afterwards():
    a, b = handoff.pair()
    sender, receiver = handoff.Sender("cpu"), handoff.Receiver("cpu")
    h = torch.ones(4, 4)
    back, _ = _roundtrip(sender, receiver, a, b, [h])
    sender._staged.host.fill_(0)  # the worker rewrites the shared pages after the checker copied them out
    assert torch.equal(back[0], torch.ones(4, 4))


def test_the_memfd_is_sealed_and_an_unsealed_one_is_refused():
    a, b = handoff.pair()
    sender, receiver = handoff.Sender("cpu"), handoff.Receiver("cpu")
    header, fd = sender.pack([torch.ones(8)])
    with pytest.raises(OSError):
        os.ftruncate(fd, 0)  # a shrink would turn the checker's mapped read into a SIGBUS
    loose = os.memfd_create("loose")
    os.ftruncate(loose, header["bytes"])
    handoff.send(a, {"outputs": header}, loose)
    message, got = handoff.recv(b)
    with pytest.raises(handoff.BadOutput, match="sealed"):
        receiver.unpack(message["outputs"], got, 1 << 20)
    assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_GROW


@pytest.mark.parametrize(
    "spec, why",
    [
        ({"dtype": "float32", "shape": [1 << 20], "offset": 0}, "outside"),
        ({"dtype": "float32", "shape": [2], "offset": 4}, "outside"),  # unaligned
        ({"dtype": "object", "shape": [2], "offset": 0}, "dtype"),
        ({"dtype": "float32", "shape": [-1], "offset": 0}, "shape"),
    ],
)
def test_a_forged_description_is_refused(spec, why):
    a, b = handoff.pair()
    sender, receiver = handoff.Sender("cpu"), handoff.Receiver("cpu")
    header, fd = sender.pack([torch.ones(16)])
    header = {**header, "tensors": [spec], "tree": {"seq": "list", "items": [{"t": 0}]}}
    handoff.send(a, {"outputs": header}, fd)
    message, got = handoff.recv(b)
    with pytest.raises(handoff.BadOutput, match=why):
        receiver.unpack(message["outputs"], got, 1 << 30)


def test_the_wall_bound_allows_for_the_hand_off_and_says_nothing_rather_than_zero():
    from tracker.capture.plausibility import HANDOFF_BYTES_PER_S, wall_per_call

    big = int(HANDOFF_BYTES_PER_S)  # one second of allowance per repetition
    reps = [{"rep": i, "received_s": 0.5 * i, "check_s": 0.1, "bytes": big} for i in range(4)]
    assert wall_per_call(reps, 1) is None  # 0.5 s apart, 1.1 s allowed: no bound, not a bound of 0
    reps = [{"rep": i, "received_s": 2.0 * i, "check_s": 0.1, "bytes": big} for i in range(4)]
    assert abs(wall_per_call(reps, 2) - 0.45e6) < 1  # (2.0 - 0.1 - 1.0) s per repetition, two inputs each


def test_the_wall_bound_allows_for_the_harness_recheck_and_still_sees_work_beyond_it():
    """On a GPU the timing process runs the harness's recheck after each repetition while the checker judges; the
    checker times that recheck once per case (`harness_recheck_s` of repetition 0), and the gap allows for it."""
    from tracker.capture.plausibility import RECHECK_MARGIN, flags, wall_per_call

    def reps(apart_s):
        out = [{"rep": i, "received_s": apart_s * i, "check_s": 0.01, "bytes": 0} for i in range(5)]
        out[0]["harness_recheck_s"] = 0.1
        return out

    # 40 launch-bound calls of 25 us a repetition, 0.1 s of recheck after each: no flag now, one before
    case = {"case_idx": 0, "passed": True, "mean_us": 25.0, "inputs": 40}
    assert wall_per_call(reps(0.101), 40) is None
    stripped = [{k: v for k, v in r.items() if k != "harness_recheck_s"} for r in reps(0.101)]
    assert [f["code"] for f in flags([{**case, "wall_us": wall_per_call(stripped, 40)}], "benchmark", "cuda")] == [
        "timing-gap"
    ]
    # work hidden outside the timed window beyond the allowance still shows, by what is left after it
    hidden = wall_per_call(reps(1.0), 40)
    assert abs(hidden - (1.0 - 0.1 * RECHECK_MARGIN) / 40 * 1e6) < 1
    assert [f["code"] for f in flags([{**case, "wall_us": hidden}], "benchmark", "cuda")] == ["timing-gap"]


def test_the_checker_times_the_harness_recheck_of_real_outputs_and_says_nothing_when_it_raises():
    from tracker.capture.checker import _recheck_seconds
    from tracker.workloads import get_workload
    from tracker.workloads.qr_v2.inputs import Case, generate

    workload = get_workload("qr_v2")
    xs = [generate(Case(2, 24, 1, seed)) for seed in (5, 6)]
    outs = [torch.geqrf(x.clone()) for x in xs]
    seconds = _recheck_seconds(workload, xs, outs, torch.device("cpu"))
    assert seconds is not None and 0 < seconds < 30
    assert _recheck_seconds(workload, xs, outs[:1], torch.device("cpu")) is None  # zip(strict=True) raises
