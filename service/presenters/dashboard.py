"""The dashboard page: one static HTML file with its script, shipped in the package (no CDN,
works with no internet); it draws its charts from the JSON API."""

from __future__ import annotations

from importlib import resources


def page() -> str:
    return resources.files("service").joinpath("static/dashboard.html").read_text("utf-8")
