"""The fault suite: kills, outages, concurrent passes, dropped connections, bad data and
fuzzing. Every test here is marked `fault` (so `-m fault` runs the suite alone) and is
bounded in time; random trials print their seeds so a failure can be replayed."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault: the fault-injection suite (tests/fault)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fault/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.fault)
