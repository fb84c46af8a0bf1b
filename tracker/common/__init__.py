"""Helpers every layer may use: process checks, atomic files, the shared vocabulary and the bad-input error.
Imports nothing else of the tracker."""
