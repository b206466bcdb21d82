"""The one-command demo (`make demo`): see __main__.py."""
