"""`reckon report --out DIR`: the dashboard's charts as static files (PNG via matplotlib's Agg
canvas, never pyplot's global state) and an index.html with the history and accuracy tables.
It renders the JSON documents the API returns (service/views.py) and reads nothing itself:
no database, no MLflow, no network, so a report can be built anywhere and mailed or archived."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

from service.units import format_duration

SCATTER = "scatter.png"
ERROR = "error.png"
FACTORS = "factors.png"
COVERAGE = "coverage.png"
INDEX = "index.html"
CHART_FILES = (SCATTER, ERROR, FACTORS, COVERAGE)

NOMINAL_COVERAGE = 0.8  # a P10-P90 range should hold 80% of outcomes
DPI = 110
PALETTE = ("#1f5fbf", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207")
_MINUTE, _HOUR, _DAY = 60.0, 3600.0, 86400.0
_DURATION_TICKS = (
    _MINUTE, 10 * _MINUTE, _HOUR, 3 * _HOUR, 6 * _HOUR, 12 * _HOUR, _DAY, 2 * _DAY, 4 * _DAY,
    7 * _DAY, 14 * _DAY, 30 * _DAY, 60 * _DAY, 120 * _DAY, 365 * _DAY, 730 * _DAY,
)  # fmt: skip

Row = Mapping[str, Any]


@dataclass(frozen=True)
class _Chart:
    file: str
    title: str
    caption: str
    empty: str  # what the page says when there is nothing to draw


_CHARTS = (
    _Chart(
        SCATTER,
        "Predicted vs observed wall time",
        "One point per reconciled estimate, log-log. On the dashed line the estimate was "
        "exact; above it the run took longer than predicted.",
        "No reconciled estimates yet.",
    ),
    _Chart(
        ERROR,
        "Signed error over time",
        "(predicted / observed - 1) x 100 by run end (UTC). Positive: predicted too long.",
        "No reconciled estimates yet.",
    ),
    _Chart(
        FACTORS,
        "Factor history per segment",
        "Fitted utilization and overhead share across factor-set versions; bands are P10-P90.",
        "No factor sets yet: they appear after the first refit.",
    ),
    _Chart(
        COVERAGE,
        "Interval coverage",
        "Share of observed wall times inside their predicted P10-P90 range; a calibrated "
        "range holds about 80%.",
        "No accuracy figures yet.",
    ),
)


def write_report(
    out_dir: Path,
    history: list[dict[str, Any]],
    accuracy: dict[str, Any] | None,
    factor_history: dict[str, Any] | None,
    running: list[dict[str, Any]],
    *,
    generated_at: datetime | None = None,
) -> list[Path]:
    """Write the charts that have data and index.html into `out_dir` (created if needed);
    return the paths written, index.html last. Chart files of an earlier report in the same
    directory that have no data now are removed, so the page and the folder agree."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        SCATTER: _scatter(history),
        ERROR: _error_over_time(history),
        FACTORS: _factors(factor_history),
        COVERAGE: _coverage(accuracy),
    }
    written: list[Path] = []
    for name, figure in figures.items():
        path = out_dir / name
        if figure is None:
            path.unlink(missing_ok=True)
            continue
        figure.savefig(path, format="png", dpi=DPI)
        written.append(path)
    index = out_dir / INDEX
    drawn = {path.name for path in written}
    index.write_text(_page(drawn, history, accuracy, running, generated_at), encoding="utf-8")
    return [*written, index]


# --- numbers and labels ------------------------------------------------------------------------


def _num(value: object) -> float | None:
    """A finite number, or None (JSON may carry null, and NaN must not reach a chart)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _short_duration(seconds: float) -> str:
    if seconds < 2 * _MINUTE:
        return f"{seconds:.0f} s"
    if seconds < 2 * _HOUR:
        return f"{seconds / _MINUTE:.0f} min"
    if seconds < 2 * _DAY:
        return f"{seconds / _HOUR:.3g} h"
    return f"{seconds / _DAY:.3g} d"


def _segment(row: Row) -> str:
    return f"{row.get('gpu') or '?'}/{row.get('precision') or '?'}"


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


# --- the charts --------------------------------------------------------------------------------


def _scatter(history: Sequence[Row]) -> Figure | None:
    points = [
        (_segment(row), predicted, observed)
        for row in history
        if (predicted := _num(row.get("predicted_seconds"))) is not None
        and (observed := _num(row.get("observed_seconds"))) is not None
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


def _error_over_time(history: Sequence[Row]) -> Figure | None:
    points = sorted(
        (ended.timestamp(), error, _segment(row))
        for row in history
        if (ended := _when(row.get("ended_at"))) is not None
        and (error := _num(row.get("error_pct"))) is not None
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


def _factors(factor_history: Mapping[str, Any] | None) -> Figure | None:
    versions = sorted(
        (
            version
            for version in (factor_history or {}).get("versions") or []
            if _num(version.get("version")) is not None
        ),
        key=lambda version: float(version["version"]),
    )
    series: dict[str, list[tuple[float, Row]]] = {}
    for version in versions:
        for item in version.get("segments") or []:
            name = str(item.get("segment") or "?")
            series.setdefault(name, []).append((float(version["version"]), item))
    if not series:
        return None
    active = next((float(v["version"]) for v in versions if v.get("active")), None)
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
    axes: Axes, points: Sequence[tuple[float, Row]], key: str, name: str, color: str
) -> None:
    usable = [(n, v, item) for n, item in points if (v := _num(item.get(key))) is not None]
    if not usable:
        return
    banded = [
        (n, low, high)
        for n, item in points
        if (low := _num(item.get(f"{key}_p10"))) is not None
        and (high := _num(item.get(f"{key}_p90"))) is not None
    ]
    if len(banded) > 1:
        axes.fill_between(
            [b[0] for b in banded], [b[1] for b in banded], [b[2] for b in banded],
            color=color, alpha=0.15, linewidth=0,
        )  # fmt: skip
    elif banded:
        axes.vlines(banded[0][0], banded[0][1], banded[0][2], color=color, alpha=0.4)
    axes.plot([u[0] for u in usable], [u[1] for u in usable], marker="o", color=color, label=name)


def _coverage(accuracy: Mapping[str, Any] | None) -> Figure | None:
    rows = _accuracy_rows(accuracy)
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
            value = _num((stats or {}).get("coverage"))
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


def _accuracy_rows(
    accuracy: Mapping[str, Any] | None,
) -> list[tuple[str, Row | None, Row | None]]:
    """(group, raw, calibrated) for the overall figures and each group; a side with n = 0 is
    None."""
    if not accuracy:
        return []

    def counted(stats: object) -> Row | None:
        if isinstance(stats, Mapping) and (_num(stats.get("n")) or 0) > 0:
            return stats
        return None

    entries: list[tuple[str, object]] = []
    if isinstance(accuracy.get("overall"), Mapping):
        entries.append(("all", accuracy["overall"]))
    entries.extend((str(g.get("group")), g) for g in accuracy.get("groups") or [])
    rows = []
    for group, entry in entries:
        if isinstance(entry, Mapping):
            raw, calibrated = counted(entry.get("raw")), counted(entry.get("calibrated"))
            if raw or calibrated:
                rows.append((group, raw, calibrated))
    return rows


# --- the page ----------------------------------------------------------------------------------

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
  color: #1d2330; margin: 24px auto; max-width: 1100px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.note, .empty { color: #5b6577; } img { max-width: 100%; border: 1px solid #d9dee7; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #d9dee7; }
th { color: #5b6577; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _pct(value: object, *, signed: bool = False) -> str:
    number = _num(value)
    if number is None:
        return "-"
    return f"{number:+.1f}%" if signed else f"{number:.1f}%"


def _share(value: object) -> str:
    number = _num(value)
    return "n/a" if number is None else f"{number:.0%}"


def _seconds(value: object) -> str:
    number = _num(value)
    return "-" if number is None or number <= 0 else format_duration(number)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int]) -> str:
    def cells(values: Sequence[str], tag: str) -> str:
        return "".join(
            f'<{tag} class="num">{v}</{tag}>' if i in numeric else f"<{tag}>{v}</{tag}>"
            for i, v in enumerate(values)
        )

    head = cells([_e(h) for h in header], "th")
    body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _history_table(history: Sequence[Row]) -> str:
    ordered = sorted(history, key=lambda row: str(row.get("ended_at") or ""), reverse=True)
    rows = [
        [
            f"<code>{_e(row.get('estimate_id'))}</code>",
            _e(_segment(row)),
            _e(_seconds(row.get("predicted_seconds"))),
            _e(_seconds(row.get("observed_seconds"))),
            _e(_pct(row.get("error_pct"), signed=True)),
            _e(str(row.get("ended_at") or "")[:16].replace("T", " ")),
            _e(row.get("line")),
        ]
        for row in ordered
    ]
    header = ["estimate", "segment", "predicted", "observed", "error", "ended (UTC)", "summary"]
    return _table(header, rows, {4})


def _accuracy_table(accuracy: Mapping[str, Any] | None) -> str:
    def pair(raw: Row | None, calibrated: Row | None, key: str, show: Any) -> str:
        return _e(f"{show((raw or {}).get(key))} / {show((calibrated or {}).get(key))}")

    rows = [
        [
            _e(group),
            _e(int(_num((raw or calibrated or {}).get("n")) or 0)),
            pair(raw, calibrated, "median_ape", _pct),
            pair(raw, calibrated, "mape", _pct),
            pair(raw, calibrated, "bias", lambda v: _pct(v, signed=True)),
            pair(raw, calibrated, "coverage", _share),
        ]
        for group, raw, calibrated in _accuracy_rows(accuracy)
    ]
    by = str((accuracy or {}).get("by") or "group")
    header = [by, "n", "median |error|", "MAPE", "bias", "coverage"]
    return _table(header, rows, {1, 2, 3, 4, 5}) + (
        '<p class="note">Each cell: raw estimate / calibrated. Errors in % of observed wall '
        "time; coverage is the share inside P10-P90.</p>"
    )


def _running_table(running: Sequence[Row]) -> str:
    rows = [
        [
            f"<code>{_e(row.get('run_id'))}</code>",
            f"<code>{_e(row.get('estimate_id'))}</code>",
            _e(_seconds(row.get("elapsed_seconds"))),
            _e(_seconds(row.get("predicted_seconds"))),
            _e(_seconds(row.get("projected_seconds"))),
            _e(_pct(row.get("slip_pct"), signed=True)),
            _e(row.get("line")),
        ]
        for row in running
    ]
    header = ["run", "estimate", "elapsed", "predicted", "projected", "slip", "summary"]
    return _table(header, rows, {5})


def _page(
    drawn: set[str],
    history: Sequence[Row],
    accuracy: Mapping[str, Any] | None,
    running: Sequence[Row],
    generated_at: datetime | None,
) -> str:
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Reckon report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Reckon report</h1>",
        '<p class="note">Training-time estimates against what MLflow observed'
        + ("" if generated_at is None else f"; generated {_e(generated_at.isoformat())}")
        + ".</p>",
    ]
    if not drawn and not history and not running:
        parts.append(
            '<p class="empty" id="no-data">No data yet: save an estimate, tag the training '
            "run with <code>reckon.estimate_id=&lt;id&gt;</code> and run "
            "<code>reckon reconcile</code>.</p>"
        )
    for chart in _CHARTS:
        parts.append(f"<h2>{_e(chart.title)}</h2>")
        if chart.file in drawn:
            parts.append(f'<p class="note">{_e(chart.caption)}</p>')
            parts.append(f'<img src="{_e(chart.file)}" alt="{_e(chart.title)}">')
        else:
            parts.append(f'<p class="empty">{_e(chart.empty)}</p>')
    parts.append("<h2>Reconciled estimates</h2>")
    parts.append(
        _history_table(history) if history else '<p class="empty">No reconciled estimates yet.</p>'
    )
    parts.append("<h2>Accuracy</h2>")
    parts.append(
        _accuracy_table(accuracy)
        if _accuracy_rows(accuracy)
        else '<p class="empty">No accuracy figures yet.</p>'
    )
    parts.append("<h2>Running now</h2>")
    parts.append(
        _running_table(running) if running else '<p class="empty">No linked runs are running.</p>'
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
