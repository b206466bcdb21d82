"""`--csv` of `reckon history` and `reckon spend`, for finance: RFC 4180 (a header row, fields
separated by commas and quoted where they hold a comma, quote or line break, CRLF line
ends), UTF-8. Each row carries the values of the `--json` document, flattened: numbers as
Python writes them back exactly (`float(cell)` is the JSON number), nothing as an empty
field, a history row's run ids joined by spaces. Text is written as stored: a label that
starts with `=` is a label, not a formula (a spreadsheet should import the file as text)."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from service.domain.money import CostTotal, RunCost
from service.domain.spending import cost_of

if TYPE_CHECKING:
    from service.domain.records import HistoryPage, Reconciliation
    from service.usecases.results.reads import Spend

COST_COLUMNS = tuple(item.name for item in dataclasses.fields(RunCost))
TOTAL_COLUMNS = tuple(item.name for item in dataclasses.fields(CostTotal))
# The history's columns: the reconciliation's keys in --json (configuration.planned.gpus and
# configuration.observed.gpus as planned_gpus and observed_gpus), then its cost's.
HISTORY_COLUMNS = (
    "estimate_id", "label", "kind", "gpu", "precision", "run_ids", "started_at", "ended_at",
    "predicted_seconds", "observed_seconds", "error_pct", "failed_segments", "planned_gpus",
    "observed_gpus", *COST_COLUMNS,
)  # fmt: skip
SPEND_COLUMNS = ("group", *TOTAL_COLUMNS)


def cell(value: object) -> str:
    """One field: None empty, a float as repr (it reads back exactly), the rest as str."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")  # RFC 4180: QUOTE_MINIMAL, CRLF
    writer.writerow(header)
    writer.writerows([cell(value) for value in row] for row in rows)
    return buffer.getvalue()


def history_csv(page: HistoryPage) -> str:
    return table(HISTORY_COLUMNS, (_history_row(item) for item in page.rows))


def _history_row(item: Reconciliation) -> list[object]:
    cost = cost_of(item, None)
    return [
        item.estimate_id, item.label, item.kind, item.gpu, item.precision,
        " ".join(item.run_ids), item.started_at.isoformat(), item.ended_at.isoformat(),
        item.predicted_seconds, item.observed_seconds, item.error_pct, item.failed_segments,
        item.planned_gpus, item.observed_gpus,
        *(getattr(cost, name) for name in COST_COLUMNS),
    ]  # fmt: skip


def spend_csv(spend: Spend) -> str:
    """The groups, one row per group and currency (totals are a sum away, per currency)."""
    return table(
        SPEND_COLUMNS,
        ([row.group, *(getattr(row.total, name) for name in TOTAL_COLUMNS)] for row in spend.rows),
    )
