"""Money planned against spent (`reckon spend`, GET /v1/spend): every reconciled forecast
priced (service.domain.money: its own price, else the prices file's) and grouped by MLflow
experiment, GPU or month of the run's end, per currency. Imported (retrospective) runs are
left out and counted: their "plan" is what the prior would have said after the fact, never
a budget. Read only; one short transaction."""

from __future__ import annotations

from datetime import datetime

from service.domain.errors import InputError
from service.domain.money import totals
from service.domain.prices import PriceTable
from service.domain.records import HistoryQuery
from service.domain.spending import (
    SPEND_GROUPINGS,
    cost_of,
    in_two_currencies,
    priced,
    spend_rows,
    unpriced_gpus,
)
from service.ports import UnitOfWork
from service.usecases.results.reads import Spend


def spend(
    uow: UnitOfWork,
    prices: PriceTable | None,
    *,
    by: str | None = None,
    since: datetime | None = None,
    gpu: str | None = None,
) -> Spend:
    """Runs that ended since `since` (on `gpu`), grouped `by` (None: one group, "all")."""
    if by is not None and by not in SPEND_GROUPINGS:
        raise InputError(f"cannot group spend by {by!r}; use one of {', '.join(SPEND_GROUPINGS)}")
    query = HistoryQuery(since=since, gpu=gpu, sort="oldest", experiments=by == "experiment")
    with uow:
        rows, _count = uow.reconciliations.page(query)
    forecasts = priced((item for item in rows if item.kind != "retrospective"), prices)
    return Spend(
        by=by,
        since=since,
        gpu=gpu,
        rows=spend_rows(forecasts, by),
        totals=totals(cost_of(item, prices) for item in forecasts),
        unpriced_gpus=unpriced_gpus(forecasts, prices),
        in_two_currencies=in_two_currencies(forecasts, prices),
        imported_left_out=len(rows) - len(forecasts),
        prices_file=prices is not None,
    )
