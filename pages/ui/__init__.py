"""Presentation helpers for the dashboard pages: Plotly charts, tables, diffs. No store access here."""
