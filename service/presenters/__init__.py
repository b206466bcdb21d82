"""Presenters: typed results into output (JSON views, CLI text, the static report, the
dashboard page, Prometheus metrics). Only entry points import them."""
