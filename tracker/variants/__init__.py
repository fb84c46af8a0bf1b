"""Variants: register kernel files and their git history, name them, scan their source, import contest results,
find dead ends. Nothing here runs a kernel (that is tracker.capture)."""
