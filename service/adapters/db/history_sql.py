"""The SQL of a history read (`reckon history`, GET /v1/history): its WHERE clauses and
ORDER BY for a HistoryQuery, the estimate row joined for its label and price, and each row's
MLflow experiment when the query asks for it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ScalarSelect, func, or_, select

from service.adapters.db.tables import EstimateRow, MlflowRunRow, ReconciliationRow, RunLinkRow
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


def first_experiment() -> ScalarSelect[str]:
    """The MLflow experiment of a reconciliation's first linked run (by start): where its
    estimate's runs were logged, for the spend by experiment. A correlated subquery over the
    run links' index on the estimate, read only when a HistoryQuery asks (`experiments`)."""
    return (
        select(MlflowRunRow.experiment_id)
        .join(RunLinkRow, RunLinkRow.run_id == MlflowRunRow.run_id)
        .where(RunLinkRow.estimate_id == ReconciliationRow.estimate_id)
        .order_by(MlflowRunRow.started_at, MlflowRunRow.run_id)
        .limit(1)
        .correlate(ReconciliationRow)
        .scalar_subquery()
    )
