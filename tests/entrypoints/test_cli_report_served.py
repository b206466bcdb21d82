"""`reckon report` on a database with two segments, one calibrated and one fallen back to raw
(issue 22, item 1): the page says for every segment what is served and why, in the headline
and in each panel's caption; the error chart draws one panel, with its own raw and calibrated
lines, per segment; --gpu and --since filter every table; a bad filter is one line, a
non-zero exit and nothing written. No MLflow: the running runs are left out, with the
reason."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from sqlalchemy import Engine

from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.entrypoints.cli.main import main
from tests.integration.history import Truth, simulate

A100 = Truth("a100-80gb", "bf16", 0.30, 0.10)
H100 = Truth("h100-sxm", "bf16", 0.42, 0.12)
FALLEN = "a100-80gb/bf16"
CALIBRATED = "h100-sxm/bf16"
ESTIMATE_ROW = re.compile(r"<tr><td><code>([0-9a-f]{16})</code></td><td>([^<]+)</td>")


def fall_back(engine: Engine, segment: str, *, by_hand: bool = False) -> int:
    """A copy of the active set with `segment` fallen back, made active (what the gate does
    when calibration loses there); returns its version."""
    now = datetime.now(UTC)
    with SqlUnitOfWork(engine) as uow:
        active = uow.factor_sets.active()
        assert active is not None
        entry = replace(active.segments[segment], fallback=True, by_hand=by_hand)
        added = uow.factor_sets.add(
            replace(
                active, created_at=now, activated_at=None,
                segments={**active.segments, segment: entry},
            )
        )  # fmt: skip
        uow.factor_sets.activate(added.version, at=now)
        uow.commit()
    return added.version


def reckon(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def two_segments(
    cli_env: str,
    engine: Engine,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> int:
    """12 runs each of a100-80gb/bf16 and h100-sxm/bf16 (January to July 2026), a refit
    (v1), and v2: v1 with a100-80gb/bf16 fallen back to raw. Returns v2's version."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    simulate(engine, [A100, H100], 12)
    assert reckon(capsys, "refit")[0] == 0
    return fall_back(engine, FALLEN)


def rows_of(page: str) -> list[tuple[str, str]]:
    """(estimate id, segment) of the reconciled-estimates table."""
    return ESTIMATE_ROW.findall(page)


def test_the_page_says_what_each_segment_is_served_and_why(
    two_segments: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = reckon(capsys, "report", "--out", str(tmp_path / "r"))
    page = (tmp_path / "r" / "index.html").read_text()

    assert code == 0, err
    assert {Path(path).name for path in out.split()} == {
        "index.html", "scatter.png", "error.png", "factors.png", "coverage.png",
    }  # fmt: skip
    version = two_segments
    assert (
        f"Served now (factor set v{version}): calibrated in 1 of 2 segments; fell back to raw "
        f"in {FALLEN} (calibration did not beat it here)."
    ) in page
    fallen = re.search(rf'<li data-segment="{FALLEN}" data-served="raw"[^>]*>([^<]+)</li>', page)
    kept = re.search(
        rf'<li data-segment="{CALIBRATED}" data-served="calibrated"[^>]*>([^<]+)', page
    )
    assert fallen and kept, page
    assert fallen.group(1).startswith(
        f"{FALLEN}: fell back to raw: calibration did not beat it here (in factor set v{version})"
    )
    assert kept.group(1).startswith(f"{CALIBRATED}: calibrated in factor set v{version}, fitted on")
    assert "median |error|" in kept.group(1) and "raw over 12 runs" in kept.group(1)
    # every panel's caption names which segments are served calibrated and which fell back
    said = f"Served now: calibrated: {CALIBRATED}; fell back to raw: {FALLEN}."
    assert page.count(said) == 4
    assert "running runs left out" in err and "Running runs left out: MLflow" in page


def test_the_error_chart_has_one_panel_with_its_own_lines_per_segment(
    two_segments: int,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from service.presenters import report_panels  # matplotlib: imported by the test alone

    drawn: list[Figure | None] = []
    original = report_panels.error_over_time

    def spy(*args: object, **kwargs: object) -> Figure | None:
        figure = original(*args, **kwargs)  # type: ignore[arg-type]
        drawn.append(figure)
        return figure

    monkeypatch.setattr(report_panels, "error_over_time", spy)
    assert reckon(capsys, "report", "--out", str(tmp_path))[0] == 0

    (figure,) = drawn
    assert figure is not None
    panels = [axes for axes in figure.axes if axes.get_visible()]
    titles = [axes.get_title(loc="left").splitlines()[0] for axes in panels]
    assert titles == [f"{FALLEN} · fell back to raw", f"{CALIBRATED} · calibrated"]
    for axes, segment in zip(panels, (FALLEN, CALIBRATED), strict=True):
        labels = sorted(
            str(line.get_label())
            for line in axes.get_lines()
            if not str(line.get_label()).startswith("_")
        )
        assert labels == [
            f"{segment} calibrated bias per month", f"{segment} raw bias per month",
        ], labels  # fmt: skip
        (dots,) = axes.collections
        assert np.asarray(dots.get_offsets()).shape == (
            12,
            2,
        )  # its own runs, none of the other segment's


def test_gpu_filters_the_headline_the_panels_and_every_table(
    two_segments: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _out, err = reckon(capsys, "report", "--out", str(tmp_path), "--gpu", "h100")
    page = (tmp_path / "index.html").read_text()

    assert code == 0, err
    rows = rows_of(page)
    assert len(rows) == 12 and {segment for _id, segment in rows} == {CALIBRATED}
    assert "Showing h100-sxm (all precisions), any time." in page
    assert "a100-80gb" not in page  # not in the headline, a caption or the accuracy table
    assert "<td>h100-sxm (all precisions)</td>" in page and f"<td>{CALIBRATED}</td>" in page
    assert "Served now: calibrated: h100-sxm/bf16." in page


def test_since_filters_the_history_and_the_scores(
    two_segments: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    _code, out, _err = reckon(capsys, "history", "--json")
    history = json.loads(out)["history"]
    since = datetime(2026, 5, 1, tzinfo=UTC)
    expected = {
        row["estimate_id"] for row in history if datetime.fromisoformat(row["ended_at"]) >= since
    }
    assert 0 < len(expected) < len(history)

    code, _out, err = reckon(capsys, "report", "--out", str(tmp_path), "--since", "2026-05-01")
    page = (tmp_path / "index.html").read_text()

    assert code == 0, err
    assert {estimate_id for estimate_id, _segment in rows_of(page)} == expected
    assert "Showing all segments, runs ended since 2026-05-01 00:00 UTC." in page
    assert f"raw over {len(expected)} runs" in page  # the scope's scores: those runs only


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--gpu", "nope", "unknown GPU 'nope'"),
        ("--since", "yesterday", "cannot read date 'yesterday'"),
    ],
)
def test_a_bad_filter_is_one_line_a_non_zero_exit_and_nothing_written(
    two_segments: int,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    option: str,
    value: str,
    said: str,
) -> None:
    out_dir = tmp_path / "report"

    code, out, err = reckon(capsys, "report", "--out", str(out_dir), option, value)

    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err, err
    assert not out_dir.exists()
