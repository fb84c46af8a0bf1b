"""KernelBeam tracker: run kernel variants against a suite, check, time, profile, and record runs in DuckDB."""

__version__ = "0.1.0"
