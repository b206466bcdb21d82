"""The report's charts drawn as one small panel per segment, on shared axes (as the
dashboard draws them): the signed error over time, raw and calibrated, and the factor
history over factor-set versions with P10-P90 bands. Each panel is titled with its segment
and what is served for it now."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, PercentFormatter

from service.calibration.model import FactorSet, SegmentFactors
from service.domain.records import Reconciliation
from service.domain.units import counted
from service.presenters.report_charts import (
    BAD,
    INK,
    MUTED,
    figure_of,
    finite,
    segment,
    tagged,
    tidy,
    time_ticks,
)
from service.presenters.served import Served
from service.usecases.results.reads import Accuracy

ERROR_LIMIT = 100.0  # beyond ±100% a point sits on the frame (the table has its value)
_RAW_LINE = "#6b7688"
_ACTIVE = "#1a7f37"


def _grid(count: int, width: float, row_height: float) -> tuple[Figure, list[Axes]]:
    """`count` panels two or three to a row, sharing both axes; the spare cells hidden."""
    columns = 1 if count == 1 else 2 if count <= 4 else 3
    rows = math.ceil(count / columns)
    figure = figure_of(width if count > 1 else width * 0.62, 0.9 + row_height * rows)
    grid = figure.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    cells: list[Axes] = [axes for row in grid for axes in row]
    for spare in cells[count:]:
        spare.set_visible(False)
    for axes in cells[:count]:
        axes.tick_params(labelbottom=True, labelleft=True, labelsize=7.5)
    return figure, cells[:count]


def _title(axes: Axes, name: str, served: Mapping[str, Served], note: str) -> None:
    said = served.get(name)
    axes.set_title(
        f"{tagged(name, served)}\n{note}", fontsize=8.5, loc="left",
        color=BAD if said is not None and said.fell_back else INK,
    )  # fmt: skip


# --- signed error over time, per segment --------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    """One period of a segment: its middle (epoch seconds), raw and calibrated bias (%)."""

    middle: float
    raw: float | None
    calibrated: float | None


def period_middle(text: str) -> float | None:
    """The middle of a "2026-10" month or a "2026-W41" ISO week, in epoch seconds."""
    try:
        if "-W" in text:
            year, week = text.split("-W")
            monday = datetime.fromisocalendar(int(year), int(week), 1).replace(tzinfo=UTC)
            return (monday + timedelta(days=3.5)).timestamp()
        start = datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        return None
    end = (start + timedelta(days=32)).replace(day=1)
    return (start.timestamp() + end.timestamp()) / 2


def buckets(series: Accuracy | None) -> dict[str, list[Bucket]]:
    """{segment: its periods in time order} from accuracy grouped by "<segment> <period>"."""
    found: dict[str, list[Bucket]] = {}
    for group in () if series is None else series.groups:
        name, _, period = group.group.rpartition(" ")
        middle = period_middle(period)
        if not name or middle is None:
            continue
        pair = group.scores
        found.setdefault(name, []).append(
            Bucket(
                middle,
                finite(pair.raw.bias) if pair.raw.n else None,
                finite(pair.calibrated.bias) if pair.calibrated.n else None,
            )
        )
    return {name: sorted(items, key=lambda b: b.middle) for name, items in found.items()}


def error_over_time(
    history: Sequence[Reconciliation],
    series: Accuracy | None,
    period: str,
    colors: Mapping[str, str],
    served: Mapping[str, Served],
) -> Figure | None:
    """One panel per segment: each run's signed error as predicted (dots), and per
    `period` the raw bias (grey, dashed) and the calibrated bias (solid, the segment's
    color), the geometric-mean signed error of the same runs."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in history:
        error = finite(row.error_pct)
        if error is not None:
            points.setdefault(segment(row), []).append((row.ended_at.timestamp(), error))
    if not points:
        return None
    periods = buckets(series)
    names = sorted(points)
    times = [t for name in names for t, _e in points[name]]
    times += [b.middle for name in names for b in periods.get(name, [])]
    values = [abs(e) for name in names for _t, e in points[name]]
    values += [
        abs(v)
        for name in names
        for b in periods.get(name, [])
        for v in (b.raw, b.calibrated)
        if v is not None
    ]
    extent = min(ERROR_LIMIT, max(10.0, *values) * 1.15)
    first, last = min(times), max(times)
    pad = max((last - first) * 0.05, 12 * 3600.0)
    figure, panels = _grid(len(names), 10.0, 2.7)
    for axes, name in zip(panels, names, strict=True):
        color = colors.get(name, MUTED)
        mine = sorted(points[name])
        clamp = [max(-extent, min(extent, e)) for _t, e in mine]
        axes.axhline(0.0, color=INK, linewidth=0.8)
        axes.scatter([t for t, _e in mine], clamp, s=14, color=color, alpha=0.45, zorder=2)
        own = periods.get(name, [])
        raw = [(b.middle, max(-extent, min(extent, b.raw))) for b in own if b.raw is not None]
        calibrated = [
            (b.middle, max(-extent, min(extent, b.calibrated)))
            for b in own
            if b.calibrated is not None
        ]
        if raw:
            axes.plot(
                [t for t, _v in raw], [v for _t, v in raw], linestyle="--", marker="o",
                markersize=3, color=_RAW_LINE, linewidth=1.3,
                label=f"{name} raw bias per {period}", zorder=3,
            )  # fmt: skip
        if calibrated:
            axes.plot(
                [t for t, _v in calibrated], [v for _t, v in calibrated], marker="s",
                markersize=4, color=color, linewidth=2.0,
                label=f"{name} calibrated bias per {period}", zorder=4,
            )  # fmt: skip
        with_backtest = sum(1 for b in own if b.calibrated is not None)
        _title(
            axes, name, served,
            f"{counted(len(mine), 'run')}, calibrated bias in {with_backtest} of "
            f"{counted(len(own), period)}",
        )  # fmt: skip
        tidy(axes)
    most = 6 if len(names) == 1 else 5 if len(names) <= 4 else 4  # labels that fit a panel
    ticks, label = time_ticks(first - pad, last + pad, most)
    for axes in panels:
        axes.set_xlim(first - pad, last + pad)
        axes.set_ylim(-extent, extent)
        axes.xaxis.set_major_locator(FixedLocator(ticks))
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: label(value)))
        axes.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    figure.supxlabel("run ended (UTC)", fontsize=9)
    figure.supylabel("signed error (> 0: predicted too long)", fontsize=9)
    figure.legend(
        handles=[
            Line2D([], [], linestyle="", marker="o", color=MUTED, alpha=0.5,
                   label="one run, as predicted"),
            Line2D([], [], linestyle="--", marker="o", markersize=3, color=_RAW_LINE,
                   label=f"raw bias per {period}"),
            Line2D([], [], marker="s", markersize=4, color=INK, linewidth=2.0,
                   label=f"calibrated bias per {period} (the segment's color)"),
        ],
        loc="outside upper center", ncols=3, frameon=False, fontsize=8,
    )  # fmt: skip
    return figure


# --- factor history, per segment ----------------------------------------------------------


def factor_series(
    sets: Sequence[FactorSet], keys: Sequence[str]
) -> dict[str, list[tuple[int, SegmentFactors]]]:
    """{key: (version, its entry) in version order} for the `keys` that have entries."""
    found: dict[str, list[tuple[int, SegmentFactors]]] = {}
    for factor_set in sorted(sets, key=lambda item: item.version):
        for key in keys:
            entry = factor_set.segments.get(key)
            if entry is not None:
                found.setdefault(key, []).append((factor_set.version, entry))
    return found


def factors(
    sets: Sequence[FactorSet],
    keys: Sequence[str],
    active_version: int | None,
    colors: Mapping[str, str],
    served: Mapping[str, Served],
) -> Figure | None:
    """One panel per segment key: utilization (solid, the segment's color) and overhead
    share (dashed, grey) over the factor-set versions, each with its P10-P90 band; a key
    with one version is a point with its range as an error bar."""
    series = factor_series(sets, keys)
    if not series:
        return None
    names = sorted(series)
    versions = sorted({version for points in series.values() for version, _e in points})
    top = max(
        value
        for points in series.values()
        for _v, entry in points
        for value in (entry.utilization_p90, entry.overhead_p90, entry.utilization)
        if finite(value) is not None
    )
    figure, panels = _grid(len(names), 10.0, 2.5)
    for axes, name in zip(panels, names, strict=True):
        points = series[name]
        _factor_line(axes, points, "utilization", colors.get(name, MUTED), "-")
        _factor_line(axes, points, "overhead", MUTED, "--")
        if active_version is not None and active_version in versions:
            axes.axvline(active_version, color=_ACTIVE, linestyle=":", linewidth=1.3)
        latest = points[-1][1]
        note = f"n = {latest.n} in v{points[-1][0]}, {latest.level} level"
        if len(points) == 1:
            note += ("; one factor set so far" if len(versions) == 1 else
                     f"; only in v{points[0][0]}")  # fmt: skip
        _title(axes, name, served, note)
        tidy(axes)
    shown = versions[:: max(1, math.ceil(len(versions) / 8))]  # at most eight labels
    for axes in panels:
        axes.set_xticks(shown, [f"v{number}" for number in shown])
        low, high = versions[0], versions[-1]
        margin = 0.5 if low == high else 0.25
        axes.set_xlim(low - margin, high + margin)
        axes.set_ylim(0.0, min(1.0, max(0.1, top * 1.08)))
    figure.supxlabel("factor-set version", fontsize=9)
    handles = [
        Line2D([], [], color=INK, linewidth=1.8, marker="o", markersize=3,
               label="utilization (the segment's color)"),
        Line2D([], [], color=MUTED, linewidth=1.4, linestyle="--", marker="o", markersize=3,
               label="overhead share"),
        Line2D([], [], color=INK, alpha=0.2, linewidth=6, label="P10-P90"),
    ]  # fmt: skip
    if active_version is not None and active_version in versions:
        handles.append(
            Line2D([], [], color=_ACTIVE, linestyle=":", label=f"active set v{active_version}")
        )
    figure.legend(
        handles=handles, loc="outside upper center", ncols=len(handles), frameon=False,
        fontsize=8,
    )  # fmt: skip
    return figure


def _factor_line(
    axes: Axes, points: Sequence[tuple[int, SegmentFactors]], key: str, color: str, style: str
) -> None:
    rows = [
        (version, value, low, high)
        for version, entry in points
        if (value := finite(getattr(entry, key))) is not None
        and (low := finite(getattr(entry, f"{key}_p10"))) is not None
        and (high := finite(getattr(entry, f"{key}_p90"))) is not None
    ]
    if not rows:
        return
    label = f"{key} P10-P90"
    if len(rows) == 1:
        version, value, low, high = rows[0]
        axes.errorbar(
            [version], [value], yerr=[[value - low], [high - value]], fmt="o", color=color,
            ecolor=color, elinewidth=2, capsize=5, markersize=5, label=label,
        )  # fmt: skip
        return
    x = [row[0] for row in rows]
    axes.fill_between(
        x, [row[2] for row in rows], [row[3] for row in rows], color=color, alpha=0.16,
        linewidth=0, label=label,
    )  # fmt: skip
    axes.plot(
        x, [row[1] for row in rows], linestyle=style, marker="o", markersize=3, color=color,
        linewidth=1.8, label=key,
    )  # fmt: skip
