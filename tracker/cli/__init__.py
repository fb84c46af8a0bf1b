"""The command line, one module per command group (asv style). `python -m tracker --help`."""
