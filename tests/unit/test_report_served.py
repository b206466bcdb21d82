"""The report says what each segment is served now, and its charts draw per segment (issue
22, item 1): the headline with no factor set, a thin segment and one fallen back to the hand
baseline; the error chart's lines stay inside their segment's panel; a single factor set is
drawn as points with their ranges; the coverage chart writes no "n/a" and its caption names
what it leaves out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
from matplotlib.text import Text

from service.presenters import report_charts, report_panels
from service.presenters.report import write_report
from service.presenters.served import served, served_all
from service.usecases.results.reads import (
    Accuracy,
    AccuracyGroup,
    FactorHistory,
    ReportData,
    ReportScope,
    ScorePair,
    Scores,
)
from tests.unit.test_report import ENDED, HISTORY, a_factor_version, a_history_row

A100, H100 = "a100-80gb/bf16", "h100-sxm/bf16"


def scores(n: int, median: float | None, coverage: float | None = None) -> Scores:
    return Scores(n, median, median, None if median is None else -median, None, coverage)


def by_segment(*groups: AccuracyGroup, overall: ScorePair | None = None) -> Accuracy:
    empty = ScorePair(scores(0, None), scores(0, None), False)
    return Accuracy("segment", None, overall or empty, groups, empty)


def data(**fields: object) -> ReportData:
    base = ReportData(
        history=list(HISTORY),
        accuracy=None,
        factor_history=FactorHistory([], None),
        running=[],
        running_error=None,
        generated_at=ENDED,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_with_no_factor_set_the_headline_says_the_prior_is_served(tmp_path: Path) -> None:
    write_report(tmp_path, data())

    page = (tmp_path / "index.html").read_text()
    assert "Served now: no factor set yet: calibrated estimates use the published prior" in page
    assert f'data-segment="{A100}" data-served="prior"' in page
    assert "Served now: the published prior in every segment" in page  # the captions


def test_thin_and_hand_baseline_segments_say_so_and_why() -> None:
    active = a_factor_version(2)
    thin = replace(active.segments[H100], n=2)
    fallen = replace(active.segments[A100], fallback=True, by_hand=True)
    active = replace(active, parameters={"thin_n": 5}, segments={A100: fallen, H100: thin})

    said_thin, said_hand = served(H100, active), served(A100, active)

    assert said_thin.state == "thin" and said_thin.label == "calibrated, thin"
    assert "fitted on 2 runs, fewer than the set's 5" in said_thin.text
    assert said_hand.state == "by_hand" and said_hand.fell_back
    assert said_hand.text.startswith("fell back to the hand baseline (the median observed")
    assert served("mi300x/bf16", active).state == "pooled"


def test_error_lines_stay_in_their_segment_panel() -> None:
    segments = {row.gpu for row in HISTORY}
    series = by_segment(
        *(
            AccuracyGroup(f"{gpu}/bf16 2026-W4{week}", ScorePair(
                scores(1, 10.0), scores(1, 4.0), False), None)
            for gpu in segments
            for week in (0, 1, 2)
        )
    )  # fmt: skip
    colors = report_charts.colors_for(f"{gpu}/bf16" for gpu in segments)

    figure = report_panels.error_over_time(HISTORY, series, "week", colors, {})

    assert figure is not None
    panels = [axes for axes in figure.axes if axes.get_visible()]
    assert [axes.get_title(loc="left").splitlines()[0] for axes in panels] == [A100, H100]
    for axes, name in zip(panels, (A100, H100), strict=True):
        lines = {str(line.get_label()): line for line in axes.get_lines()}
        raw, calibrated = (
            lines[f"{name} raw bias per week"],
            lines[f"{name} calibrated bias per week"],
        )
        assert np.asarray(raw.get_xdata()).size == 3
        assert np.asarray(calibrated.get_ydata()).tolist() == [-4.0] * 3
        assert not [
            label for label in lines if label.startswith(("a100", "h100")) and name not in label
        ]


def test_one_factor_set_is_drawn_as_points_with_their_range(tmp_path: Path) -> None:
    one = FactorHistory([a_factor_version(1)], active_version=1)
    keys = [A100, H100]

    figure = report_panels.factors(one.sets, keys, 1, report_charts.colors_for(keys), {})
    write_report(tmp_path, data(factor_history=one, active=one.sets[0]))

    assert figure is not None
    for axes in (axes for axes in figure.axes if axes.get_visible()):
        assert len(axes.containers) == 2  # utilization and overhead: each an error bar
        assert "one factor set so far" in axes.get_title(loc="left")
    page = (tmp_path / "index.html").read_text()
    assert "One factor set so far: each panel is a point with its P10-P90 range." in page


def test_coverage_draws_no_na_and_its_caption_names_what_it_leaves_out(tmp_path: Path) -> None:
    accuracy = by_segment(
        AccuracyGroup(A100, ScorePair(scores(4, 9.0, 0.5), scores(4, 5.0, 0.75), False), False),
        AccuracyGroup(H100, ScorePair(scores(2, 9.0), scores(2, 5.0, 1.0), False), False),
        AccuracyGroup("mi300x/bf16", ScorePair(scores(3, 9.0), scores(0, None), False), None),
        overall=ScorePair(scores(9, 9.0, 0.5), scores(6, 5.0, 0.8), False),
    )
    rows, left_out, unranged = report_charts.coverage_rows(accuracy, "all segments")

    figure = report_charts.coverage(rows, {}, {})
    write_report(tmp_path, data(accuracy=accuracy))

    assert [row.group for row in rows] == ["all segments", A100, H100]
    assert left_out == ["mi300x/bf16"] and unranged == [H100, "mi300x/bf16"]
    assert figure is not None
    texts = [t.get_text() for t in figure.findobj(Text)]
    assert not [t for t in texts if "n/a" in t]
    assert "raw 50% · n = 4" in texts and "calibrated 100% · n = 2" in texts
    page = (tmp_path / "index.html").read_text()
    assert "Left out, no prediction had a range: mi300x/bf16." in page
    assert (
        f"Raw estimates saved without a range (calibrated bar only): {H100}, mi300x/bf16." in page
    )


def test_the_gpu_scope_keeps_its_segments_only() -> None:
    active = a_factor_version(3)
    rows = [*HISTORY, a_history_row(7, 3600.0, 3900.0, gpu="mi300x")]

    said = served_all(data(history=rows, active=active, scope=ReportScope(gpu="h100-sxm")))

    assert list(said) == [H100] and said[H100].state == "calibrated"
