"""The README's first command: the demo runs end to end and shows what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.mlflow


def test_the_demo_reconciles_the_articles_run_and_prints_a_calibrated_estimate() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "demo"], cwd=ROOT, capture_output=True, text=True,
        timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over" in out
    assert "succeeded" in out and "reconciled, 0 skipped" in out
    assert "median APE" in out and "calibrated" in out
    assert "P10 / P50 / P90" in out and "factors from     factor set 1" in out
    assert not (ROOT / ".demo").exists()  # it cleans up after itself
