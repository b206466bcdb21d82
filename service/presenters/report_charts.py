"""The report's charts: matplotlib figures on the Agg canvas (never pyplot's global state),
drawn from typed results (reconciliations, the accuracy document). Here: what every chart
shares, the scatter and the coverage bars; the panels per segment (error over time, factor
history) are report_panels.py."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

from service.domain.records import Reconciliation
from service.presenters.served import Served
from service.usecases.results.reads import Accuracy, Scores

NOMINAL_COVERAGE = 0.8  # a P10-P90 range should hold 80% of outcomes
DPI = 110
# The dashboard's colors but its red, which here marks a segment that fell back (BAD); a
# segment keeps its color across the charts of one report.
PALETTE = (
    "#1f5fbf", "#c2410c", "#15803d", "#7c3aed", "#0e7490", "#a16207", "#be185d", "#4d7c0f",
    "#475569",
)  # fmt: skip
INK, MUTED, GRID, BAD = "#1d2330", "#5b6577", "#eef1f5", "#b91c1c"
_MINUTE, _HOUR, _DAY = 60.0, 3600.0, 86400.0
_DURATION_TICKS = (
    _MINUTE, 10 * _MINUTE, _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 4 * _DAY,
    7 * _DAY, 14 * _DAY, 30 * _DAY, 60 * _DAY, 120 * _DAY, 365 * _DAY, 730 * _DAY,
)  # fmt: skip


# --- numbers, labels, colors ---------------------------------------------------------------


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


def colors_for(names: Iterable[str]) -> dict[str, str]:
    """Colors by sorted name, so a segment keeps its color across the charts of a report."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names)))}


def tagged(name: str, served: Mapping[str, Served]) -> str:
    """ "h100-sxm/bf16 · calibrated": a segment with what is served for it."""
    said = served.get(name)
    return name if said is None else f"{name} · {said.label}"


def figure_of(width: float = 7.0, height: float = 4.2) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself: savefig renders with Agg, no GUI, no pyplot
    return figure


def tidy(axes: Axes) -> None:
    axes.grid(True, color=GRID)
    axes.set_axisbelow(True)


_TIME_STEPS = (
    _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 7 * _DAY, 14 * _DAY, 30 * _DAY,
    91 * _DAY, 182 * _DAY, 365 * _DAY,
)  # fmt: skip


def time_ticks(
    start: float, end: float, most: int = 6
) -> tuple[list[float], Callable[[float], str]]:
    """Round UTC instants (epoch seconds) between `start` and `end`, at most about `most`,
    and their labels. Done here rather than with matplotlib.dates, whose API is untyped."""
    step = next((s for s in _TIME_STEPS if (end - start) / s <= most), _TIME_STEPS[-1])
    first = math.ceil(start / step) * step
    ticks = [first + i * step for i in range(int((end - first) // step) + 1)]
    shape = "%m-%d %H:%M" if step < _DAY else "%Y-%m-%d"

    def label(value: float) -> str:
        return datetime.fromtimestamp(value, UTC).strftime(shape)

    return ticks, label


# --- predicted vs observed ----------------------------------------------------------------


def scatter(
    history: Sequence[Reconciliation], colors: Mapping[str, str], served: Mapping[str, Served]
) -> Figure | None:
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
    figure = figure_of(6.4, 5.4)
    axes = figure.add_subplot()
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.plot([low, high], [low, high], linestyle="--", color=INK, linewidth=1, label="y = x")
    for name in sorted({name for name, _p, _o in points}):
        mine = [(p, o) for key, p, o in points if key == name]
        axes.scatter(
            [p for p, _o in mine], [o for _p, o in mine], s=36, alpha=0.8,
            color=colors.get(name, MUTED), label=tagged(name, served), zorder=3,
        )  # fmt: skip
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
    tidy(axes)
    axes.legend(loc="upper left", fontsize=8, frameon=False)
    return figure


# --- interval coverage per segment --------------------------------------------------------


@dataclass(frozen=True)
class CoverageRow:
    group: str
    raw: Scores | None  # None: nothing counted, or no prediction had a range
    calibrated: Scores | None


def coverage_rows(
    accuracy: Accuracy | None, overall: str
) -> tuple[list[CoverageRow], list[str], list[str]]:
    """The bars to draw (`overall` names the first row, the scope's), the groups left out
    (no range on either side) and those whose raw estimates were saved without one."""
    rows, left_out, unranged = [], [], []
    for group, raw, calibrated in accuracy_rows(accuracy):
        name = overall if group == "all" else group
        raw_ranged = raw if raw is not None and finite(raw.coverage) is not None else None
        calibrated_ranged = (
            calibrated
            if calibrated is not None and finite(calibrated.coverage) is not None
            else None
        )
        if raw is not None and raw_ranged is None and group != "all":
            unranged.append(name)
        if raw_ranged is None and calibrated_ranged is None:
            if group != "all":
                left_out.append(name)
            continue
        rows.append(CoverageRow(name, raw_ranged, calibrated_ranged))
    return rows, left_out, unranged


def coverage(
    rows: Sequence[CoverageRow], colors: Mapping[str, str], served: Mapping[str, Served]
) -> Figure | None:
    """Raw (pale) and calibrated bars per row, each labelled with its share and n; a side
    without a range draws no bar (the caption says which)."""
    if not rows:
        return None
    figure = figure_of(7.6, 1.5 + 0.62 * len(rows))
    axes = figure.add_subplot()
    height = 0.36
    for index, row in enumerate(rows):
        color = colors.get(row.group, INK)
        sides = [
            (stats, alpha, kind, value)
            for stats, alpha, kind in ((row.raw, 0.35, "raw"), (row.calibrated, 1.0, "calibrated"))
            if stats is not None and (value := finite(stats.coverage)) is not None
        ]
        for position, (stats, alpha, kind, value) in enumerate(sides):
            y = index + (0.0 if len(sides) == 1 else (position - 0.5) * height)
            axes.barh(y, max(value, 0.004), height=height * 0.92, color=color, alpha=alpha)
            inside = value > 0.36  # the label fits inside the bar, left of the nominal line
            axes.text(
                0.012 if inside else value + 0.012, y, f"{kind} {value:.0%} · n = {stats.n}",
                va="center", ha="left", fontsize=7.5,
                color="white" if inside and alpha == 1.0 else INK,
            )  # fmt: skip
    axes.axvline(NOMINAL_COVERAGE, color="#9a6700", linestyle="--", linewidth=1)
    axes.text(
        NOMINAL_COVERAGE + 0.008, -0.72, "nominal 80%", ha="left", va="center", fontsize=8,
        color="#9a6700",
    )  # fmt: skip
    labels = [
        row.group if row.group not in served else f"{row.group}\n{served[row.group].label}"
        for row in rows
    ]
    axes.set_yticks(range(len(rows)), labels, fontsize=8)
    for tick, row in zip(axes.get_yticklabels(), rows, strict=True):
        said = served.get(row.group)
        tick.set_color(BAD if said is not None and said.fell_back else INK)
    axes.set_ylim(len(rows) - 0.4, -0.8)
    axes.set_xlim(0.0, 1.0)
    axes.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    axes.set_xlabel("share of observed wall times inside their P10-P90 range")
    axes.set_title("Interval coverage per segment (pale: raw, as saved; solid: calibrated)")
    axes.grid(True, axis="x", color=GRID)
    axes.set_axisbelow(True)
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
