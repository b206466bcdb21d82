"""The report's index.html: the headline (what each segment is served now and why), the
charts with their captions, and the history, accuracy and running tables, in the scope of
--gpu and --since. Every value from the data is escaped."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.domain.comparison import human_line
from service.domain.records import Reconciliation, RunningProjection
from service.domain.units import format_duration
from service.presenters.report_charts import accuracy_rows, finite, segment
from service.presenters.served import Served, groups_by_name, headline, scores_clause, summary
from service.presenters.wording import running_line
from service.usecases.results.reads import Accuracy, ReportData, ReportScope, Scores


@dataclass(frozen=True)
class Panel:
    """A chart on the page: its file (drawn or not), title, caption and what the page says
    in its place when there is nothing to draw."""

    file: str
    title: str
    caption: str
    empty: str


_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif;
  color: #1d2330; margin: 24px auto; max-width: 1100px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.note, .empty { color: #5b6577; } img { max-width: 100%; border: 1px solid #d9dee7; }
#headline { border: 1px solid #d9dee7; border-radius: 6px; padding: 8px 16px; }
#headline ul { margin: 4px 0 8px; padding-left: 20px; }
.served-raw, .served-by_hand { color: #b91c1c; } .served-thin { color: #9a6700; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #d9dee7; }
th { color: #5b6577; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def scope_text(scope: ReportScope) -> str:
    """ "h100-sxm (all precisions), runs ended since 2026-10-01 00:00 UTC"."""
    what = "all segments" if scope.gpu is None else f"{scope.gpu} (all precisions)"
    when = (
        "any time" if scope.since is None else f"runs ended since {scope.since:%Y-%m-%d %H:%M} UTC"
    )
    return f"{what}, {when}"


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

    head = cells([e(h) for h in header], "th")
    body = "".join(f"<tr>{cells(row, 'td')}</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _served_cell(said: Served | None) -> str:
    if said is None:
        return ""
    return f'<span class="served-{e(said.state)}" title="{e(said.text)}">{e(said.label)}</span>'


def _history_table(history: Sequence[Reconciliation]) -> str:
    ordered = sorted(history, key=lambda row: row.ended_at, reverse=True)
    rows = [
        [
            f"<code>{e(row.estimate_id)}</code>",
            e(segment(row)),
            e(_seconds(row.predicted_seconds)),
            e(_seconds(row.observed_seconds)),
            e(_pct(row.error_pct, signed=True)),
            e(f"{row.ended_at:%Y-%m-%d %H:%M}"),
            e(human_line(row.predicted_seconds, row.observed_seconds)),
        ]
        for row in ordered
    ]
    header = ["estimate", "segment", "predicted", "observed", "error", "ended (UTC)", "summary"]
    return _table(header, rows, {4})


def _accuracy_table(accuracy: Accuracy | None, overall: str, served: Mapping[str, Served]) -> str:
    def pair(raw: Scores | None, calibrated: Scores | None, key: str, show: Any) -> str:
        return e(f"{show(_score(raw, key))} / {show(_score(calibrated, key))}")

    rows = [
        [
            e(overall if group == "all" else group),
            _served_cell(served.get(group)),
            e(int(finite(_score(raw or calibrated, "n")) or 0)),
            pair(raw, calibrated, "median_ape", _pct),
            pair(raw, calibrated, "mape", _pct),
            pair(raw, calibrated, "bias", lambda v: _pct(v, signed=True)),
            pair(raw, calibrated, "coverage", _share),
        ]
        for group, raw, calibrated in accuracy_rows(accuracy)
    ]
    header = ["segment", "served now", "n", "median |error|", "MAPE", "bias", "coverage"]
    return _table(header, rows, {2, 3, 4, 5, 6}) + (
        '<p class="note">Each cell: raw estimate / calibrated. Errors in % of observed wall '
        "time; coverage is the share inside P10-P90 (n/a: no prediction had a range).</p>"
    )


def _score(scores: Scores | None, key: str) -> object:
    return None if scores is None else getattr(scores, key)


def _running_table(running: Sequence[RunningProjection]) -> str:
    rows = [
        [
            f"<code>{e(item.run_id)}</code>",
            f"<code>{e(item.estimate_id)}</code>",
            e(_seconds(item.elapsed_seconds)),
            e(_seconds(item.predicted_seconds)),
            e(_seconds(item.projected_seconds)),
            e(_pct(item.slip_pct, signed=True)),
            e(running_line(item)),
        ]
        for item in running
    ]
    header = ["run", "estimate", "elapsed", "predicted", "projected", "slip", "summary"]
    return _table(header, rows, {5})


def overall_name(scope: ReportScope) -> str:
    return "all segments" if scope.gpu is None else f"{scope.gpu} (all precisions)"


def _headline(data: ReportData, served: Mapping[str, Served]) -> list[str]:
    groups = groups_by_name(() if data.accuracy is None else data.accuracy.groups)
    parts = [
        '<div id="headline">',
        f'<p id="served-summary">{e(summary(data.active, served.values()))}</p>',
    ]
    if served:
        parts.append("<ul>")
        for name, said in served.items():
            parts.append(
                f'<li data-segment="{e(name)}" data-served="{e(said.state)}" '
                f'class="served-{e(said.state)}">{e(headline(said, groups.get(name)))}</li>'
            )
        parts.append("</ul>")
    overall = None if data.accuracy is None else data.accuracy.overall
    if overall is not None and overall.raw.n:
        line = f"{overall_name(data.scope)}: {scores_clause(overall)}"
        covered = finite(overall.calibrated.coverage)
        if covered is not None:
            line += f"; {covered:.0%} of calibrated P10-P90 ranges held the run (nominal 80%)"
        parts.append(f'<p class="note" id="scope-scores">{e(line)}.</p>')
    parts.append("</div>")
    return parts


def page(
    data: ReportData, panels: Sequence[Panel], drawn: set[str], served: Mapping[str, Served]
) -> str:
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>Reckon report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Reckon report</h1>",
        '<p class="note">Training-time estimates against what MLflow observed; generated '
        f'{e(data.generated_at.isoformat())}. <span id="scope">Showing '
        f"{e(scope_text(data.scope))}.</span></p>",
        *_headline(data, served),
    ]
    if not drawn and not data.history and not data.running:
        parts.append(
            '<p class="empty" id="no-data">No data yet: save an estimate, tag the training '
            "run with <code>reckon.estimate_id=&lt;id&gt;</code> and run "
            "<code>reckon reconcile</code>.</p>"
        )
    for panel in panels:
        parts.append(f"<h2>{e(panel.title)}</h2>")
        if panel.file in drawn:
            parts.append(f'<p class="note">{e(panel.caption)}</p>')
            parts.append(f'<img src="{e(panel.file)}" alt="{e(panel.title)}">')
        else:
            parts.append(f'<p class="empty">{e(panel.empty)}</p>')
    scope = scope_text(data.scope)
    parts.append("<h2>Reconciled estimates</h2>")
    parts.append(
        _history_table(data.history)
        if data.history
        else f'<p class="empty">No reconciled estimates yet for {e(scope)}.</p>'
    )
    parts.append("<h2>Accuracy per segment</h2>")
    parts.append(
        _accuracy_table(data.accuracy, overall_name(data.scope), served)
        if accuracy_rows(data.accuracy)
        else f'<p class="empty">No accuracy figures yet for {e(scope)}.</p>'
    )
    parts.append("<h2>Running now</h2>")
    if data.scope.since is not None:
        parts.append(
            '<p class="note">--since does not apply here: a running run has not ended.</p>'
        )
    if data.running_error is not None:
        parts.append(f'<p class="empty">Running runs left out: {e(data.running_error)}</p>')
    elif data.running:
        parts.append(_running_table(data.running))
    else:
        on = "" if data.scope.gpu is None else f" on {e(data.scope.gpu)}"
        parts.append(f'<p class="empty">No linked runs are running{on}.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
