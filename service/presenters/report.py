"""`reckon report --out DIR [--gpu NAME] [--since WHEN]`: the dashboard's panels as static
files (PNG, drawn in report_charts.py and report_panels.py) and an index.html (report_page.py)
that opens with what each segment is served now and why (served.py). It renders the typed
results the application returns, already filtered to the scope, and reads nothing itself:
no database, no MLflow, no network, so a report can be built anywhere and mailed or
archived."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from service.domain.errors import InputError
from service.presenters import report_charts as charts
from service.presenters import report_panels as panels
from service.presenters.report_page import Panel, overall_name, page, scope_text
from service.presenters.served import Served, caption, in_scope, is_segment, served_all
from service.usecases.results.reads import ReportData

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SCATTER = "scatter.png"
ERROR = "error.png"
FACTORS = "factors.png"
COVERAGE = "coverage.png"
INDEX = "index.html"
CHART_FILES = (SCATTER, ERROR, FACTORS, COVERAGE)  # as written
_ON_THE_PAGE = (ERROR, SCATTER, COVERAGE, FACTORS)  # the dashboard's order


def ensure_folder(out_dir: Path) -> None:
    """Create `out_dir` (and its parents) now, so a folder that cannot be written is one
    InputError before any data is read."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _unwritable(out_dir, error) from None


def _unwritable(out_dir: Path, error: OSError) -> InputError:
    reason = error.strerror or type(error).__name__
    return InputError(f"cannot write the report to {str(out_dir)!r}: {reason}")


def write_report(out_dir: Path, data: ReportData) -> list[Path]:
    """Write the charts that have data and index.html into `out_dir` (created if needed);
    return the paths written, index.html last. Chart files of an earlier report in the same
    directory that have no data now are removed, so the page and the folder agree. A folder
    that cannot be written is an InputError naming it and why."""
    try:
        return _write(out_dir, data)
    except OSError as error:
        raise _unwritable(out_dir, error) from None


def _write(out_dir: Path, data: ReportData) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    served = served_all(data)
    drawn_panels = _panels(data, served)
    written: list[Path] = []
    for name in CHART_FILES:
        path = out_dir / name
        figure = drawn_panels[name][1]
        if figure is None:
            path.unlink(missing_ok=True)
            continue
        figure.savefig(path, format="png", dpi=charts.DPI)
        written.append(path)
    index = out_dir / INDEX
    drawn = {path.name for path in written}
    shown = [drawn_panels[name][0] for name in _ON_THE_PAGE]
    index.write_text(page(data, shown, drawn, served), encoding="utf-8")
    return [*written, index]


def _served_in(names: Iterable[str], served: Mapping[str, Served]) -> str:
    """The caption's line on what is served for the segments a panel draws."""
    return caption([served[name] for name in sorted(set(names)) if name in served])


def _panels(
    data: ReportData, served: Mapping[str, Served]
) -> dict[str, tuple[Panel, Figure | None]]:
    """Each chart's figure (None: nothing to draw) and its place on the page."""
    scope = scope_text(data.scope)
    keys = list(served)
    colors = charts.colors_for([*keys, *(charts.segment(row) for row in data.history)])
    history_segments = {charts.segment(row) for row in data.history}
    no_runs = f"No reconciled estimates yet for {scope}."
    error = Panel(
        ERROR,
        "Error over time, per segment",
        f"One panel per segment (GPU/precision), same axes in every panel. Dots: each "
        "reconciled run's signed error as predicted, (predicted / observed - 1) x 100, by the "
        f"day it ended (UTC); above 0 the estimate was too long. Lines: the bias per "
        f"{data.period} (the geometric-mean signed error) of the raw estimates (grey, dashed) "
        "and of what calibration would have predicted for the same runs (solid). "
        + _served_in(history_segments, served),
        no_runs,
    )
    scatter = Panel(
        SCATTER,
        "Predicted vs observed wall time",
        "One point per reconciled estimate, log-log, colored by segment. On the dashed line "
        "the estimate was exact; above it the run took longer than predicted. "
        + _served_in(history_segments, served),
        no_runs,
    )
    rows, left_out, unranged = charts.coverage_rows(data.accuracy, overall_name(data.scope))
    notes = []
    if left_out:
        notes.append(f"Left out, no prediction had a range: {', '.join(left_out)}.")
    if unranged:
        notes.append(
            f"Raw estimates saved without a range (calibrated bar only): {', '.join(unranged)}."
        )
    coverage = Panel(
        COVERAGE,
        "Interval coverage per segment",
        "Share of observed wall times inside their P10-P90 range, raw estimates as saved "
        "(pale) and calibrated (solid); a well-calibrated range holds about 80% (dashed "
        "line). Each bar says how many runs it counts (n). "
        + " ".join(notes)
        + (" " if notes else "")
        + _served_in([row.group for row in rows], served),
        f"No predicted ranges to score for {scope}."
        + (f" Without a range: {', '.join(left_out)}." if left_out else ""),
    )
    factor_keys = sorted(
        {
            key
            for factor_set in data.factor_history.sets
            for key in factor_set.segments
            if is_segment(key) and in_scope(key, data.scope)
        }
    )
    versions = len(data.factor_history.sets)
    factors = Panel(
        FACTORS,
        "Factor history, per segment",
        "Fitted utilization (solid, the segment's color) and overhead share (dashed, grey) in "
        "each factor-set version, with their P10-P90 bands; same axes in every panel; the "
        "dotted green line is the active set. "
        + (
            "One factor set so far: each panel is a point with its P10-P90 range. "
            if versions == 1
            else ""
        )
        + _served_in(factor_keys, served),
        _no_factors(data, scope),
    )
    factor_chart = panels.factors(
        data.factor_history.sets, factor_keys, data.factor_history.active_version, colors, served
    )
    error_chart = panels.error_over_time(data.history, data.series, data.period, colors, served)
    return {
        ERROR: (error, error_chart),
        SCATTER: (scatter, charts.scatter(data.history, colors, served)),
        COVERAGE: (coverage, charts.coverage(rows, colors, served)),
        FACTORS: (factors, factor_chart),
    }


def _no_factors(data: ReportData, scope: str) -> str:
    if data.active is None and not data.factor_history.sets:
        return "No factor sets yet: they appear after the first refit."
    if not data.factor_history.sets and data.scope.since is not None:
        active = (
            "" if data.active is None else f" (the active set, v{data.active.version}, is older)"
        )
        return f"No factor set was made since {data.scope.since:%Y-%m-%d %H:%M} UTC{active}."
    return f"No factors for {scope}."
