"""The `reckon` command line (main.py: the entry point and its error table)."""
