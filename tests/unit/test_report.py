"""`reckon report`'s renderer: the application's typed results in, PNG charts and an index.html
out.
What a reader of the report would notice: the charts exist and are real images, the page
shows them with the history lines and accuracy numbers, and empty data gives a page that
says so instead of a crash."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from service.calibration.model import FactorSet, SegmentFactors
from service.domain.comparison import human_line
from service.domain.records import Reconciliation, RunningProjection
from service.presenters.json_views import running_view
from service.presenters.report import write_report
from service.usecases.results.reads import (
    Accuracy,
    AccuracyGroup,
    FactorHistory,
    ReportData,
    ScorePair,
    Scores,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHARTS = ("scatter.png", "error.png", "factors.png", "coverage.png")
ENDED = datetime(2026, 10, 20, 6, 0, tzinfo=UTC)


def a_history_row(
    index: int, predicted: float, observed: float, **overrides: Any
) -> Reconciliation:
    """One reconciled estimate, as the history use case returns it."""
    ended = ENDED - timedelta(days=3 * index)
    fields: dict[str, Any] = {
        "estimate_id": f"{index:016x}",
        "run_ids": (f"run{index}",),
        "gpu": "a100-80gb" if index % 2 else "h100-sxm",
        "precision": "bf16",
        "recompute": "full",
        "started_at": ended - timedelta(seconds=observed),
        "ended_at": ended,
        "predicted_seconds": predicted,
        "predicted_seconds_p10": None,
        "predicted_seconds_p90": None,
        "observed_seconds": observed,
        "observed_compute_seconds": None,
        "ratio": observed / predicted,
        "error_pct": 100.0 * (predicted / observed - 1.0),
        "abs_error_pct": abs(100.0 * (predicted / observed - 1.0)),
        "implied_utilization": None,
        "implied_overhead": None,
        "implied_effective_utilization": None,
        "factors_kind": "combined",
        "failed_segments": 0,
    }
    return Reconciliation(**{**fields, **overrides})


def line(row: Reconciliation) -> str:
    return human_line(row.predicted_seconds, row.observed_seconds)


HISTORY = [
    a_history_row(0, 84 * 3600.0, 80 * 3600.0),
    a_history_row(1, 2 * 86400.0, 2.4 * 86400.0),
    a_history_row(2, 12 * 3600.0, 11 * 3600.0),
    a_history_row(3, 6 * 86400.0, 7.5 * 86400.0),
]


def _pair(
    raw: tuple[int, float, float, float, float | None],
    calibrated: tuple[int, float, float, float, float | None],
) -> ScorePair:
    """(n, median APE %, MAPE %, bias %, coverage) of raw and of calibrated."""

    def scores(n: int, median: float, mape: float, bias: float, coverage: float | None) -> Scores:
        return Scores(n, median, mape, bias, None, coverage)

    return ScorePair(scores(*raw), scores(*calibrated), False)


ACCURACY = Accuracy(
    by="gpu_type",
    since=None,
    overall=_pair((4, 9.1, 12.0, 3.2, 0.5), (4, 5.0, 6.1, 1.0, 0.75)),
    groups=(
        AccuracyGroup(
            "a100-80gb", _pair((2, 10.0, 10.0, -4.0, 0.5), (2, 4.0, 4.0, 1.0, 1.0)), None
        ),
        AccuracyGroup("h100-sxm", _pair((2, 14.0, 14.0, 9.0, None), (2, 6.0, 6.0, 2.0, 0.5)), None),
    ),
    retrospective=_pair((0, 0.0, 0.0, 0.0, None), (0, 0.0, 0.0, 0.0, None)),
)


def a_factor_version(version: int) -> FactorSet:
    return FactorSet(
        version=version,
        created_at=ENDED + timedelta(days=version),
        activated_at=ENDED + timedelta(days=version),
        segments={
            segment: SegmentFactors(
                segment=segment,
                level="segment",
                utilization=utilization,
                utilization_p10=utilization - 0.05,
                utilization_p90=utilization + 0.05,
                overhead=overhead,
                overhead_p10=overhead - 0.03,
                overhead_p90=overhead + 0.04,
                log_sigma=0.2,
                n=3 * version,
                n_throughput=3 * version,
                combined_only=False,
                log_sigma_low=0.2,
                log_sigma_high=0.2,
            )
            for segment, utilization, overhead in (
                ("a100-80gb/bf16", 0.38 + 0.01 * version, 0.14),
                ("h100-sxm/bf16", 0.33 + 0.02 * version, 0.20 - 0.01 * version),
            )
        },
        method="test",
        parameters={},
        provenance={},
        reconciliation_count=6 * version,
        backtest_score=None,
        baseline_score=None,
    )


FACTOR_HISTORY = FactorHistory([a_factor_version(v) for v in (1, 2, 3)], active_version=3)
NO_FACTORS = FactorHistory([], active_version=None)

RUNNING = [
    RunningProjection(
        run_id="d49e15184fe043b6",
        estimate_id="23311988954a4480",
        started_at=ENDED - timedelta(days=1),
        elapsed_seconds=86400.0,
        predicted_seconds=138240.0,
        projected_seconds=153600.0,
        slip_pct=11.1,
    )
]


def report_data(
    history: list[Reconciliation],
    accuracy: Accuracy | None = None,
    factor_history: FactorHistory = NO_FACTORS,
    running: list[RunningProjection] | None = None,
) -> ReportData:
    return ReportData(
        history=history,
        accuracy=accuracy,
        factor_history=factor_history,
        running=running or [],
        running_error=None,
        generated_at=ENDED,
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return int(width), int(height)


def test_a_report_with_data_writes_four_charts_and_an_index_that_shows_them(
    tmp_path: Path,
) -> None:
    written = write_report(
        tmp_path / "report", report_data(HISTORY, ACCURACY, FACTOR_HISTORY, RUNNING)
    )

    out = tmp_path / "report"
    assert written == [*(out / name for name in CHARTS), out / "index.html"]
    for name in CHARTS:
        width, height = png_size(out / name)
        assert (out / name).stat().st_size > 1024 and width > 300 and height > 200, name
    page = (out / "index.html").read_text()
    for name in CHARTS:
        assert f'<img src="{name}"' in page
    for row in HISTORY:
        assert line(row) in page and row.estimate_id in page
    assert "9.1% / 5.0%" in page  # overall median |error|, raw / calibrated
    assert "n/a / 50%" in page  # h100-sxm coverage: raw unknown, calibrated 50%
    assert running_view(RUNNING[0])["line"] in page
    assert "No data yet" not in page


def test_a_report_with_no_data_says_so_and_draws_nothing(tmp_path: Path) -> None:
    written = write_report(tmp_path, report_data([]))

    assert written == [tmp_path / "index.html"]
    page = (tmp_path / "index.html").read_text()
    assert "No data yet" in page and "<img" not in page
    assert not any((tmp_path / name).exists() for name in CHARTS)


def test_history_alone_draws_its_charts_and_names_what_is_missing(tmp_path: Path) -> None:
    nothing = Scores(0, None, None, None, None, None)
    empty = ScorePair(nothing, nothing, False)
    empty_accuracy = Accuracy("gpu_type", None, empty, (), empty)
    unusable = a_history_row(9, 3600.0, 3600.0, observed_seconds=float("nan"), error_pct=None)

    written = write_report(tmp_path, report_data([*HISTORY, unusable], empty_accuracy))

    assert [path.name for path in written] == ["scatter.png", "error.png", "index.html"]
    page = (tmp_path / "index.html").read_text()
    assert "No factor sets yet" in page and "No accuracy figures yet" in page
    assert "No linked runs are running" in page


def test_a_report_rewritten_without_data_drops_the_old_charts(tmp_path: Path) -> None:
    write_report(tmp_path, report_data(HISTORY, ACCURACY, FACTOR_HISTORY, RUNNING))

    write_report(tmp_path, report_data([]))

    assert sorted(path.name for path in tmp_path.iterdir()) == ["index.html"]


def test_text_from_the_data_is_escaped_in_the_page(tmp_path: Path) -> None:
    row = a_history_row(0, 3600.0, 4000.0, gpu="<script>alert(1)</script>")

    write_report(tmp_path, report_data([row]))

    page = (tmp_path / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_single_point_and_a_single_version_still_draw(tmp_path: Path) -> None:
    one_version = FactorHistory([a_factor_version(1)], active_version=1)

    written = write_report(tmp_path, report_data(HISTORY[:1], None, one_version))

    assert [path.name for path in written] == [
        "scatter.png",
        "error.png",
        "factors.png",
        "index.html",
    ]
