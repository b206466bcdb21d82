"""`reckon report --out DIR`: the dashboard's charts as static files (PNG, drawn in
report_charts.py) and an index.html with the history, accuracy and running tables. It
renders the typed results the application returns and reads nothing itself: no database,
no MLflow, no network, so a report can be built anywhere and mailed or archived."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.domain.comparison import human_line
from service.domain.errors import InputError
from service.domain.records import Reconciliation, RunningProjection
from service.domain.units import format_duration
from service.presenters import report_charts as charts
from service.presenters.report_charts import accuracy_rows, finite, segment
from service.presenters.wording import running_line
from service.usecases.results.reads import Accuracy, ReportData, Scores

SCATTER = "scatter.png"
ERROR = "error.png"
FACTORS = "factors.png"
COVERAGE = "coverage.png"
INDEX = "index.html"
CHART_FILES = (SCATTER, ERROR, FACTORS, COVERAGE)


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
    figures = {
        SCATTER: charts.scatter(data.history),
        ERROR: charts.error_over_time(data.history),
        FACTORS: charts.factors(data.factor_history),
        COVERAGE: charts.coverage(data.accuracy),
    }
    written: list[Path] = []
    for name, figure in figures.items():
        path = out_dir / name
        if figure is None:
            path.unlink(missing_ok=True)
            continue
        figure.savefig(path, format="png", dpi=charts.DPI)
        written.append(path)
    index = out_dir / INDEX
    drawn = {path.name for path in written}
    index.write_text(_page(drawn, data), encoding="utf-8")
    return [*written, index]


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
    number = finite(value)
    if number is None:
        return "-"
    return f"{number:+.1f}%" if signed else f"{number:.1f}%"


def _share(value: object) -> str:
    number = finite(value)
    return "n/a" if number is None else f"{number:.0%}"


def _seconds(value: object) -> str:
    number = finite(value)
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


def _history_table(history: Sequence[Reconciliation]) -> str:
    ordered = sorted(history, key=lambda row: row.ended_at, reverse=True)
    rows = [
        [
            f"<code>{_e(row.estimate_id)}</code>",
            _e(segment(row)),
            _e(_seconds(row.predicted_seconds)),
            _e(_seconds(row.observed_seconds)),
            _e(_pct(row.error_pct, signed=True)),
            _e(f"{row.ended_at:%Y-%m-%d %H:%M}"),
            _e(human_line(row.predicted_seconds, row.observed_seconds)),
        ]
        for row in ordered
    ]
    header = ["estimate", "segment", "predicted", "observed", "error", "ended (UTC)", "summary"]
    return _table(header, rows, {4})


def _accuracy_table(accuracy: Accuracy | None) -> str:
    def pair(raw: Scores | None, calibrated: Scores | None, key: str, show: Any) -> str:
        return _e(f"{show(_score(raw, key))} / {show(_score(calibrated, key))}")

    rows = [
        [
            _e(group),
            _e(int(finite(_score(raw or calibrated, "n")) or 0)),
            pair(raw, calibrated, "median_ape", _pct),
            pair(raw, calibrated, "mape", _pct),
            pair(raw, calibrated, "bias", lambda v: _pct(v, signed=True)),
            pair(raw, calibrated, "coverage", _share),
        ]
        for group, raw, calibrated in accuracy_rows(accuracy)
    ]
    by = (accuracy.by if accuracy is not None else None) or "group"
    header = [by, "n", "median |error|", "MAPE", "bias", "coverage"]
    return _table(header, rows, {1, 2, 3, 4, 5}) + (
        '<p class="note">Each cell: raw estimate / calibrated. Errors in % of observed wall '
        "time; coverage is the share inside P10-P90.</p>"
    )


def _score(scores: Scores | None, key: str) -> object:
    return None if scores is None else getattr(scores, key)


def _running_table(running: Sequence[RunningProjection]) -> str:
    rows = [
        [
            f"<code>{_e(item.run_id)}</code>",
            f"<code>{_e(item.estimate_id)}</code>",
            _e(_seconds(item.elapsed_seconds)),
            _e(_seconds(item.predicted_seconds)),
            _e(_seconds(item.projected_seconds)),
            _e(_pct(item.slip_pct, signed=True)),
            _e(running_line(item)),
        ]
        for item in running
    ]
    header = ["run", "estimate", "elapsed", "predicted", "projected", "slip", "summary"]
    return _table(header, rows, {5})


def _page(drawn: set[str], data: ReportData) -> str:
    history, accuracy, running, generated_at = (
        data.history,
        data.accuracy,
        data.running,
        data.generated_at,
    )
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Reckon report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Reckon report</h1>",
        '<p class="note">Training-time estimates against what MLflow observed'
        + f"; generated {_e(generated_at.isoformat())}"
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
        if accuracy_rows(accuracy)
        else '<p class="empty">No accuracy figures yet.</p>'
    )
    parts.append("<h2>Running now</h2>")
    parts.append(
        _running_table(running) if running else '<p class="empty">No linked runs are running.</p>'
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
