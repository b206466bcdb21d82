"""The report's charts: matplotlib figures on the Agg canvas (never pyplot's global state),
drawn from typed results (reconciliations, factor sets, the accuracy document)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

from service.calibration.model import SegmentFactors
from service.domain.records import Reconciliation
from service.usecases.results.reads import Accuracy, FactorHistory, Scores

NOMINAL_COVERAGE = 0.8  # a P10-P90 range should hold 80% of outcomes
DPI = 110
PALETTE = ("#1f5fbf", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207")
_MINUTE, _HOUR, _DAY = 60.0, 3600.0, 86400.0
_DURATION_TICKS = (
    _MINUTE, 10 * _MINUTE, _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 4 * _DAY,
    7 * _DAY, 14 * _DAY, 30 * _DAY, 60 * _DAY, 120 * _DAY, 365 * _DAY, 730 * _DAY,
)  # fmt: skip


# --- numbers and labels ------------------------------------------------------------------------


def finite(value: object) -> float | None:
    """A finite number, or None (a missing figure; NaN must not reach a chart)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _short_duration(seconds: float) -> str:
    if seconds < 2 * _MINUTE:
        return f"{seconds:.0f} s"
    if seconds < 2 * _HOUR:
        return f"{seconds / _MINUTE:.0f} min"
    if seconds < 2 * _DAY:
        return f"{seconds / _HOUR:.3g} h"
    return f"{seconds / _DAY:.3g} d"


def segment(row: Reconciliation) -> str:
    return f"{row.gpu}/{row.precision}"


def _colors(names: Iterable[str]) -> dict[str, str]:
    """Colors by sorted name, so a segment keeps its color across the charts of a report."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _figure(width: float = 7.0, height: float = 4.2) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: savefig renders with Agg, no GUI, no pyplot
    return figure


def _legend(axes: Axes) -> None:
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="best", fontsize=8, frameon=False)


# --- the charts (each None when it has nothing to draw) ---------------------------------


def scatter(history: Sequence[Reconciliation]) -> Figure | None:
    points = [
        (segment(row), predicted, observed)
        for row in history
        if (predicted := finite(row.predicted_seconds)) is not None
        and (observed := finite(row.observed_seconds)) is not None
        and predicted > 0
        and observed > 0
    ]
    if not points:
        return None
    values = [value for _segment_name, p, o in points for value in (p, o)]
    low, high = min(values) / 1.6, max(values) * 1.6
    figure = _figure(6.0, 5.2)
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.plot([low, high], [low, high], linestyle="--", color="#1d2330", linewidth=1, label="y = x")
    colors = _colors(name for name, _p, _o in points)
    for name, color in colors.items():
        mine = [(p, o) for segment, p, o in points if segment == name]
        axes.scatter(
            [p for p, _o in mine], [o for _p, o in mine], s=36, color=color, label=name, zorder=3
        )
    ticks = [tick for tick in _DURATION_TICKS if low <= tick <= high] or [low, high]
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(FixedLocator(ticks))
        axis.set_minor_locator(NullLocator())
        axis.set_major_formatter(FuncFormatter(lambda value, _pos: _short_duration(value)))
    axes.set_xlim(low, high)
    axes.set_ylim(low, high)
    axes.set_xlabel("predicted wall time")
    axes.set_ylabel("observed wall time")
    axes.set_title("Predicted vs observed wall time")
    axes.grid(True, color="#eef1f5")
    axes.set_axisbelow(True)
    _legend(axes)
    return figure


def error_over_time(history: Sequence[Reconciliation]) -> Figure | None:
    points = sorted(
        (row.ended_at.timestamp(), error, segment(row))
        for row in history
        if (error := finite(row.error_pct)) is not None
    )
    if not points:
        return None
    figure = _figure()
    axes = figure.add_subplot()
    axes.plot([p[0] for p in points], [p[1] for p in points], color="#9aa6b8", linewidth=1)
    for name, color in _colors(p[2] for p in points).items():
        mine = [p for p in points if p[2] == name]
        axes.scatter(
            [p[0] for p in mine], [p[1] for p in mine], s=30, color=color, label=name, zorder=3
        )
    axes.axhline(0.0, color="#1d2330", linewidth=1)
    extent = max(10.0, *(abs(p[1]) for p in points)) * 1.15
    axes.set_ylim(-extent, extent)
    first, last = points[0][0], points[-1][0]
    pad = max((last - first) * 0.06, 6 * _HOUR)
    ticks, label = _time_ticks(first - pad, last + pad)
    axes.set_xlim(first - pad, last + pad)
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: label(value)))
    axes.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    axes.set_xlabel("run ended (UTC)")
    axes.set_ylabel("signed error")
    axes.set_title("Signed error over time")
    axes.grid(True, color="#eef1f5")
    axes.set_axisbelow(True)
    _legend(axes)
    return figure


_TIME_STEPS = (
    _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY,
    91 * _DAY, 182 * _DAY, 365 * _DAY,
)  # fmt: skip


def _time_ticks(start: float, end: float) -> tuple[list[float], Callable[[float], str]]:
    """Round UTC instants (epoch seconds) between `start` and `end`, at most about six, and
    their labels. Done here rather than with matplotlib.dates, whose API is untyped."""
    step = next((s for s in _TIME_STEPS if (end - start) / s <= 6), _TIME_STEPS[-1])
    first = math.ceil(start / step) * step
    ticks = [first + i * step for i in range(int((end - first) // step) + 1)]
    shape = "%m-%d %H:%M" if step < _DAY else "%Y-%m-%d"

    def label(value: float) -> str:
        return datetime.fromtimestamp(value, UTC).strftime(shape)

    return ticks, label


def factors(factor_history: FactorHistory) -> Figure | None:
    versions = sorted(factor_history.sets, key=lambda factor_set: factor_set.version)
    series: dict[str, list[tuple[float, SegmentFactors]]] = {}
    for version in versions:
        for item in version.segments.values():
            series.setdefault(item.segment, []).append((float(version.version), item))
    if not series:
        return None
    active = factor_history.active_version
    colors = _colors(series)
    figure = _figure(9.0, 4.0)
    numbers = sorted({number for points in series.values() for number, _item in points})
    for index, (key, title) in enumerate(
        (("utilization", "utilization"), ("overhead", "overhead share"))
    ):
        axes = figure.add_subplot(1, 2, index + 1)
        for name, points in series.items():
            _factor_series(axes, points, key, name, colors[name])
        if active is not None:
            axes.axvline(active, color="#1a7f37", linestyle=":", linewidth=1.2, label="active")
        shown = numbers[:: max(1, math.ceil(len(numbers) / 10))]  # at most ten labels
        axes.set_xticks(shown, [f"v{number:g}" for number in shown])
        if len(numbers) == 1:
            axes.set_xlim(numbers[0] - 0.5, numbers[0] + 0.5)
        axes.set_ylim(bottom=0.0)
        axes.set_xlabel("factor-set version")
        axes.set_title(title)
        axes.grid(True, color="#eef1f5")
        axes.set_axisbelow(True)
        if index == 0:
            _legend(axes)
    return figure


def _factor_series(
    axes: Axes, points: Sequence[tuple[float, SegmentFactors]], key: str, name: str, color: str
) -> None:
    usable = [(n, v, item) for n, item in points if (v := finite(getattr(item, key))) is not None]
    if not usable:
        return
    banded = [
        (n, low, high)
        for n, item in points
        if (low := finite(getattr(item, f"{key}_p10"))) is not None
        and (high := finite(getattr(item, f"{key}_p90"))) is not None
    ]
    if len(banded) > 1:
        axes.fill_between(
            [b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded],
            color=color, alpha=0.15, linewidth=0,
        )  # fmt: skip
    elif banded:
        axes.vlines(banded[0][0], banded[0][1], banded[0][2], color=color, alpha=0.4)
    axes.plot([u[0] for u in usable], [u[1] for u in usable], marker="o", color=color, label=name)


def coverage(accuracy: Accuracy | None) -> Figure | None:
    rows = accuracy_rows(accuracy)
    drawn = [(group, raw, calibrated) for group, raw, calibrated in rows if raw or calibrated]
    if not drawn:
        return None
    figure = _figure(7.0, 1.4 + 0.55 * len(drawn))
    axes = figure.add_subplot()
    height = 0.38
    for index, (_group, raw, calibrated) in enumerate(drawn):
        for offset, stats, color, label in (
            (-height / 2, raw, "#9aa6b8", "raw estimate"),
            (height / 2, calibrated, "#1f5fbf", "calibrated"),
        ):
            value = None if stats is None else finite(stats.coverage)
            y = index + offset
            if value is None:
                axes.text(0.01, y, "n/a", va="center", fontsize=8, color="#5b6577")
                continue
            axes.barh(y, value, height=height, color=color, label=label if index == 0 else None)
            inside = value > 0.9  # past a near-full bar the label would leave the axes
            axes.text(
                value - 0.01 if inside else value + 0.01, y, f"{value:.0%}", va="center",
                ha="right" if inside else "left", fontsize=8,
                color="white" if inside else "#1d2330",
            )  # fmt: skip
    axes.axvline(
        NOMINAL_COVERAGE, color="#9a6700", linestyle="--", linewidth=1, label="nominal 80%"
    )
    axes.set_yticks(range(len(drawn)), [group for group, _raw, _calibrated in drawn])
    axes.invert_yaxis()
    axes.set_xlim(0.0, 1.0)
    axes.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    axes.set_xlabel("share of observations inside P10-P90")
    axes.set_title("Interval coverage")
    axes.grid(True, axis="x", color="#eef1f5")
    axes.set_axisbelow(True)
    handles, labels = axes.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=3, frameon=False, fontsize=8)
    return figure


def accuracy_rows(accuracy: Accuracy | None) -> list[tuple[str, Scores | None, Scores | None]]:
    """(group, raw, calibrated) for the overall figures and each group; a side with n = 0 is
    None."""
    if accuracy is None:
        return []

    def counted(stats: Scores) -> Scores | None:
        return stats if stats.n > 0 else None

    entries = [("all", accuracy.overall)] + [(g.group, g.scores) for g in accuracy.groups]
    rows = []
    for group, pair in entries:
        raw, calibrated = counted(pair.raw), counted(pair.calibrated)
        if raw or calibrated:
            rows.append((group, raw, calibrated))
    return rows
