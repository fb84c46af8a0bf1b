"""Helpers every layer may use: process checks and atomic files. Imports nothing else of the tracker."""
