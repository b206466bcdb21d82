"""Fixtures of the browser tests (the dashboard on a real server, canned data and the demo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import Browser, find_chromium


@pytest.fixture(scope="module")
def chromium() -> str:
    return find_chromium()


@pytest.fixture
def browser(chromium: str, tmp_path: Path) -> Browser:
    return Browser(chromium, tmp_path / "chromium")
