"""A timed case's statistics over its samples (vocabulary.CASE_STATS), in plain Python: the runner computes them
without importing torch, the worker's stop rule with the same code."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


@dataclass
class Stats:
    runs: int
    mean: float
    std: float
    err: float  # standard error of the mean: std / sqrt(runs)
    best: float
    worst: float
    median: float


def stats(samples: list[float]) -> Stats:
    runs = len(samples)
    mean = sum(samples) / runs
    std = math.sqrt(sum((s - mean) ** 2 for s in samples) / (runs - 1)) if runs > 1 else 0.0
    return Stats(runs, mean, std, std / math.sqrt(runs), min(samples), max(samples), statistics.median(samples))
