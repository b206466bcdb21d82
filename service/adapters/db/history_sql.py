"""The SQL of a history read (`reckon history`, GET /v1/history): its WHERE clauses and
ORDER BY for a HistoryQuery, the estimate row joined for its label."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_

from service.adapters.db.tables import EstimateRow, ReconciliationRow
from service.domain.records import HistoryQuery

HISTORY_ORDER: dict[str, tuple[Any, ...]] = {  # HistoryQuery.sort -> ORDER BY (ties by estimate id)
    "newest": (ReconciliationRow.ended_at.desc(),),
    "oldest": (ReconciliationRow.ended_at.asc(),),
    "worst": (ReconciliationRow.abs_error_pct.desc(),),
    "best": (ReconciliationRow.abs_error_pct.asc(),),
}


def history_conditions(query: HistoryQuery) -> list[Any]:
    """WHERE clauses of a history read (the estimate row joined for its label)."""
    conditions: list[Any] = []
    if query.since is not None:
        conditions.append(ReconciliationRow.ended_at >= query.since)
    if query.gpu is not None:
        conditions.append(ReconciliationRow.gpu == query.gpu)
    if query.precision is not None:
        conditions.append(ReconciliationRow.precision == query.precision)
    if query.search:
        pattern = "%" + _escaped(query.search.lower()) + "%"
        searched = (
            ReconciliationRow.estimate_id, EstimateRow.label, ReconciliationRow.run_ids,
            ReconciliationRow.gpu, ReconciliationRow.precision,
        )  # fmt: skip
        conditions.append(or_(*(func.lower(c).like(pattern, escape="\\") for c in searched)))
    return conditions


def _escaped(text: str) -> str:
    """`text` for a LIKE pattern: its own %, _ and \\ matched literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
