"""The README's first command: the demo runs end to end and shows what it promises."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.mlflow


def test_the_demo_reconciles_the_articles_run_and_prints_a_calibrated_estimate() -> None:
    shutil.rmtree(ROOT / ".demo", ignore_errors=True)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "demo", "--keep"], cwd=ROOT, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        kept = (ROOT / ".demo" / "reckon.db").is_file()
        reopened = _reopen_history(done.stdout)
    finally:
        shutil.rmtree(ROOT / ".demo", ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over" in out
    assert "succeeded" in out and "reconciled, 0 skipped" in out
    assert "median APE" in out and "calibrated" in out
    assert "P10 / P50 / P90" in out and "factors from     factor set 1" in out
    # Raw and calibrated per segment; a segment worse calibrated says it fell back.
    rows = _accuracy_rows(done.stdout)
    segments = {name for name, _ in rows} - {"all"}
    assert len(segments) >= 3 and all((name, "raw") in rows for name in segments)
    for name in segments:
        (raw_ape, _), (calibrated_ape, note) = rows[name, "raw"], rows[name, "calibrated"]
        if calibrated_ape > raw_ape:
            assert note.startswith("fell back to raw"), (name, raw_ape, calibrated_ape, note)
    # `reckon factors` flags the same segments.
    factor_lines = done.stdout.split("$ reckon factors", 1)[1].split("\n\n", 1)[0].splitlines()
    for name in segments:
        if rows[name, "calibrated"][1].startswith("fell back to raw"):
            line = next(line for line in factor_lines if line.split()[:1] == [name])
            assert "fell back to raw" in line, line
    # --keep keeps the data and prints the exact commands that reopen it; they work.
    assert kept and "to reopen it:" in out and "reckon serve" in out
    assert reopened.returncode == 0 and "+5.0% over" in reopened.stdout, reopened.stderr


def _reopen_history(printed: str) -> subprocess.CompletedProcess[str]:
    """Run the printed `export` lines and `reckon history`, as a user pasting them would."""
    lines = [line.strip() for line in printed.splitlines()]
    exports = [line for line in lines if line.startswith("export ")]
    history = next(line for line in lines if line.endswith(" history"))
    script = "\n".join([*exports, history])
    return subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=60, check=False
    )


def _accuracy_rows(printed: str) -> dict[tuple[str, str], tuple[float, str]]:
    """(group, raw|calibrated) -> (median APE in %, the row's note) of `reckon accuracy`."""
    lines = printed.splitlines()
    start = lines.index("$ reckon accuracy --by segment") + 2  # after the header
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        name, kind, _n, median, *rest = line.split()
        rows[name, kind] = (float(median.rstrip("%")), " ".join(rest[3:]))
    return rows
