"""Capture: run a variant in an isolated worker process, time it as the contest does, record what ran."""
