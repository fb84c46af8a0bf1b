"""A GPU Mode problem folder as a workload: its own case lists (task.yml), generator and checker (reference.py).

The folder holds task.yml (`tests:` and `benchmarks:` as lists of argument dicts, optional `name:`),
reference.py (generate_input(**args), check_implementation(data, output), ref_kernel(data)) and task.py (the
types a kernel imports with `from task import ...`). Case lists come from task.yml alone, so the runner never
imports the reference; the worker (in the sandbox, beside the kernel) and the checker process (outside it: it
judges with the folder's own generator and check_implementation) do, with the folder first on sys.path so `task`
and `utils` are the folder's. A problem folder is therefore code you choose to run, as a contest's harness is:
the sandbox contains the kernel, not the folder.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tracker.common.errors import InputError
from tracker.workloads.base import (
    BENCHMARK_SEED_STEP,
    SMOKE_MAX_REPS,
    CheckResult,
    combine_seed,
    files_sha256,
    inputs_per_rep,
    tensor_bytes,
)

REQUIRED_FILES = ("task.yml", "reference.py")
HASHED_FILES = ("task.yml", "reference.py", "task.py", "utils.py")


@dataclass(frozen=True)
class ArgsCase:
    """A case as GPU Mode writes it: keyword arguments of generate_input (usually with a `seed`)."""

    items: tuple[tuple[str, Any], ...]
    # Distinct inputs per timed repetition when task.yml fixes it (`benchmark_inputs: N`); None: as many as fit
    # 256 MiB, known once the first input exists (the checker reports the count it made).
    inputs: int | None = None

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> ArgsCase:
        return cls(tuple(args.items()))

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.items)

    @property
    def seed(self) -> int | None:
        seed = self.args.get("seed")
        return int(seed) if isinstance(seed, int) else None

    @property
    def spec(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.items)

    def input_count(self) -> int:
        """The count known before any input exists (see `inputs`); the recorded count is the checker's."""
        return self.inputs or 1

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.items if k != "seed") or "(no arguments)"

    def with_seed(self, seed: int) -> ArgsCase:
        return ArgsCase(tuple((k, seed if k == "seed" else v) for k, v in self.items), self.inputs)

    def to_dict(self) -> dict[str, Any]:
        return self.args


@dataclass(frozen=True)
class ProblemSuite:
    name: str
    tests: tuple[ArgsCase, ...]
    benchmarks: tuple[ArgsCase, ...]
    description: str = ""
    max_reps: int | None = None


def is_problem_folder(path: str | Path) -> bool:
    return Path(path).is_dir() and all((Path(path) / f).is_file() for f in REQUIRED_FILES)


def _cases(spec: dict[str, Any], key: str, where: Path, inputs: int | None = None) -> tuple[ArgsCase, ...]:
    rows = spec.get(key) or []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{where}: `{key}` must be a list of argument mappings, e.g. - {{size: 1024, seed: 42}}")
    return tuple(ArgsCase(tuple(r.items()), inputs) for r in rows)


def _verdict(result: Any) -> CheckResult:
    """check_implementation returns (passed, message) in newer GPU Mode problems, an error string in older ones."""
    if isinstance(result, tuple) and len(result) == 2:  # the flag may be a numpy or torch bool
        passed = bool(result[0])
        return CheckResult(passed, "" if passed else str(result[1] or "check_implementation failed"))
    if result is None or result is True or result == "":
        return CheckResult(True)
    if result is False:
        return CheckResult(False, "check_implementation failed")
    return CheckResult(False, str(result))


class ProblemFolder:
    """A GPU Mode problem folder. The main suite is named after the problem; `smoke` is its first test."""

    flags_mutation = False  # GPU Mode's harness gives the kernel a clone: writing into an output buffer is fine

    def __init__(self, folder: str | Path):
        self.folder = Path(folder).resolve()
        if not self.folder.is_dir():
            raise InputError(f"no problem folder at {folder}")
        missing = [f for f in REQUIRED_FILES if not (self.folder / f).is_file()]
        if missing:
            raise InputError(f"{folder} is not a problem folder: it lacks {', '.join(missing)}")
        yml = self.folder / "task.yml"
        try:
            spec = yaml.safe_load(yml.read_text()) or {}
        except yaml.YAMLError as exc:
            raise InputError(f"{yml} is not valid YAML: {exc}") from None
        if not isinstance(spec, dict):
            raise InputError(f"{yml} must be a mapping with `tests:` and `benchmarks:`")
        self.name = str(spec.get("name") or self.folder.name)
        fixed = spec.get("benchmark_inputs")
        if fixed is not None and (type(fixed) is not int or fixed < 1):
            raise InputError(f"{yml}: `benchmark_inputs` must be a positive integer (inputs per timed repetition)")
        tests, benchmarks = _cases(spec, "tests", yml), _cases(spec, "benchmarks", yml, fixed)
        if not tests and not benchmarks:
            raise InputError(f"{yml} lists no tests and no benchmarks")
        first = (tests or benchmarks)[:1]
        self._suites = {
            self.name: ProblemSuite(self.name, tests, benchmarks, f"{self.name}: task.yml tests and benchmarks"),
            "smoke": ProblemSuite("smoke", first, first, f"{self.name}: the first test case", SMOKE_MAX_REPS),
        }
        self._reference = None

    @property
    def suites(self) -> dict[str, ProblemSuite]:
        return self._suites

    @property
    def sha256(self) -> str:
        return files_sha256([self.folder / f for f in HASHED_FILES if (self.folder / f).is_file()])

    @property
    def task_dir(self) -> Path:
        return self.folder

    def default_suite(self, gpu: bool) -> str:
        return self.name if gpu else "smoke"

    def hidden_seed(self, case: ArgsCase, run_seed: int) -> ArgsCase:
        return case if case.seed is None else case.with_seed(combine_seed(case.seed, run_seed))

    @property
    def reference(self) -> Any:
        """The folder's reference.py, imported once with the folder first on sys.path (by the worker and the checker,
        never by the runner)."""
        if self._reference is None:
            if str(self.folder) not in sys.path:
                sys.path.insert(0, str(self.folder))
            spec = importlib.util.spec_from_file_location("reference", self.folder / "reference.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules["reference"] = module
            spec.loader.exec_module(module)
            for fn in ("generate_input", "check_implementation"):
                if not callable(getattr(module, fn, None)):
                    raise AttributeError(f"{self.folder / 'reference.py'} defines no {fn}")
            self._reference = module
        return self._reference

    def generate(self, case: ArgsCase, seed: int | None = None, device: Any = "cpu") -> Any:
        args = case.args if seed is None or "seed" not in case.args else {**case.args, "seed": seed}
        return self.reference.generate_input(**args)

    def benchmark_inputs(self, case: ArgsCase, device: Any = "cpu") -> list[Any]:
        """The inputs one timed repetition loops over, as the contest's harness makes them: seeds seed+42,
        seed+84, ..., as many as fit 256 MiB (at most 50), unless task.yml's `benchmark_inputs: N` fixes the
        count. A case without a seed has one input, its own."""
        if case.seed is None:
            if case.input_count() > 1:
                raise InputError(f"case {case.spec} asks for {case.inputs} inputs but has no seed to vary")
            return [self.generate(case, None, device)]
        first = self.generate(case, case.seed + BENCHMARK_SEED_STEP, device)
        count = case.inputs or inputs_per_rep(tensor_bytes(first))
        return [first] + [self.generate(case, case.seed + BENCHMARK_SEED_STEP * i, device) for i in range(2, count + 1)]

    def check(self, data: Any, output: Any) -> CheckResult:
        return _verdict(self.reference.check_implementation(data, output))

    def check_outputs(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> CheckResult:
        for i, (data, output) in enumerate(zip(inputs, outputs, strict=True)):
            result = self.check(data, output)
            if not result.passed:
                return result if len(inputs) == 1 else CheckResult(False, f"input {i}: {result.message}")
        return CheckResult(True)

    def harness_recheck(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        self.check_outputs(inputs, outputs)  # already the folder's own checker, one output at a time

    def work(self, case: ArgsCase) -> tuple[float | None, float | None]:
        return None, None  # task.yml does not say; rate columns stay empty

    def case_columns(self, case: ArgsCase) -> dict[str, Any]:
        return {"seed": case.seed, "label": case.label, "args": json.dumps(case.args, default=str)}
