"""Suites as data: a suite is a list of correctness tests and a list of ranked benchmarks.

The qr_v2 cases are the contest's (docs/workload-qr_v2.md); `smoke` covers every case type with small shapes so it runs
in seconds on a CPU. A suite names its input generator and checker so other workloads can be added as data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tracker.common.errors import InputError
from tracker.common.vocabulary import RUN_MODES
from tracker.workloads.base import SMOKE_MAX_REPS, inputs_per_rep


@dataclass(frozen=True)
class Case:
    batch: int
    n: int
    cond: float
    seed: int
    case: str = "dense"
    inputs: int | None = None  # distinct inputs per timed repetition; None: the contest's formula

    @property
    def spec(self) -> str:
        return f"{self.batch}x{self.n} c{self.cond:g} s{self.seed} {self.case}"

    @property
    def label(self) -> str:
        """Seed-free name, stable across hidden seeds: what history and comparisons key on."""
        return f"{self.batch}x{self.n} c{self.cond:g} {self.case}"

    def input_count(self) -> int:
        if self.inputs is not None:
            return self.inputs
        return inputs_per_rep(self.batch * self.n * self.n * 4)  # the float32 A

    def with_seed(self, seed: int) -> Case:
        return Case(self.batch, self.n, self.cond, seed, self.case, self.inputs)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Suite:
    name: str
    tests: tuple[Case, ...]
    benchmarks: tuple[Case, ...]
    description: str = ""
    max_reps: int | None = None


def hidden_seed(case_seed: int, run_seed: int) -> int:
    """The contest's hidden-seed transform of a case seed."""
    a, s = case_seed, run_seed
    return a + (a + s) * (a + s + 1) // 2


def _parse(rows: str) -> tuple[Case, ...]:
    """Rows of 'batch n cond seed [case]'."""
    cases = []
    for line in rows.strip().splitlines():
        parts = line.split()
        cases.append(
            Case(
                int(parts[0]),
                int(parts[1]),
                float(parts[2]),
                int(parts[3]),
                *(parts[4:5] or ["dense"]),
            )
        )
    return tuple(cases)


QR_V2 = Suite(
    name="qr_v2",
    description="GPU Mode qr_v2: 22 correctness tests and 12 ranked benchmarks",
    tests=_parse(
        """
        20 32 1 53124
        40 176 1 3321
        40 352 1 1200
        16 512 2 32523
        4 1024 2 4327
        1 4096 1 75342
        16 512 4 32524
        16 512 0 32525 rankdef
        16 512 0 32526 clustered
        16 512 0 32527 band
        16 512 0 32528 rowscale
        16 512 0 32529 nearcollinear
        4 1024 4 4328
        4 1024 0 4329 rankdef
        4 1024 0 4330 nearrank
        4 1024 0 4331 clustered
        2 2048 2 224466
        2 2048 0 224467 rankdef
        1 4096 0 75343 upper
        16 512 2 32530 mixed
        4 1024 2 4332 mixed
        2 2048 2 224468 mixed
        """
    ),
    benchmarks=_parse(
        """
        20 32 1 43214
        40 176 1 423011
        40 352 1 123456
        640 512 2 1029
        60 1024 2 75342
        8 2048 1 224466
        2 4096 1 32412
        640 512 2 770001 mixed
        60 1024 2 770002 mixed
        640 512 0 770003 rankdef
        640 512 0 770004 clustered
        60 1024 0 770005 nearrank
        """
    ),
)

SMOKE = Suite(
    name="smoke",
    description="small shapes covering every case type; seconds on a CPU",
    tests=_parse(
        """
        4 16 1 101
        3 24 2 102 upper
        3 32 0 103 rankdef
        3 32 0 104 nearrank
        3 32 0 105 clustered
        2 64 0 106 band
        3 32 0 107 rowscale
        3 32 0 108 nearcollinear
        12 32 2 109 mixed
        """
    ),
    benchmarks=tuple(
        Case(c.batch, c.n, c.cond, c.seed, c.case, inputs=4)
        for c in _parse(
            """
            8 16 1 201
            4 48 1 202
            8 32 2 203 mixed
            4 32 0 204 rankdef
            """
        )
    ),
    max_reps=SMOKE_MAX_REPS,
)

SUITES: dict[str, Suite] = {s.name: s for s in (QR_V2, SMOKE)}


def get_suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise InputError(f"unknown suite {name!r}; choose from {', '.join(SUITES)}") from None


def cases_for(suite: Suite, mode: str) -> tuple[Case, ...]:
    """Test mode checks the tests; benchmark and leaderboard modes time the benchmarks."""
    if mode not in RUN_MODES:
        raise InputError(f"unknown mode {mode!r}; choose from {', '.join(RUN_MODES)}")
    return suite.tests if mode == "test" else suite.benchmarks
