"""Reconciled estimates priced and grouped, pure: the cost of each (service.domain.money over
its stored plan, observation and own price), and planned against observed cost per group
(`reckon spend --by experiment|gpu|month`, `reckon accuracy --by`), per currency."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from service.domain.money import CostTotal, RunCost, run_cost, totals
from service.domain.prices import PriceTable
from service.domain.records import Reconciliation

ALL = "all"  # the group of every run, as `reckon accuracy` names its overall row
UNKNOWN_EXPERIMENT = "unknown"  # a run Reckon has linked but no pass has stored yet
# experiment: the MLflow experiment id of the estimate's first run (its runs' experiment);
# gpu: the GPU model; month: the month (UTC) the run ended in, as `--since` filters.
SPEND_GROUPINGS: dict[str, Callable[[Reconciliation], str]] = {
    "experiment": lambda item: item.experiment_id or UNKNOWN_EXPERIMENT,
    "gpu": lambda item: item.gpu,
    "month": lambda item: f"{item.ended_at:%Y-%m}",
}


@dataclass(frozen=True)
class SpendRow:
    """One group's planned against observed cost in one currency (or not comparable)."""

    group: str
    total: CostTotal


def cost_of(item: Reconciliation, prices: PriceTable | None) -> RunCost:
    """What `item` was planned to cost and cost, at its own price or the file's."""
    if item.cost is not None:
        return item.cost
    return run_cost(
        gpu=item.gpu,
        planned_gpus=item.planned_gpus,
        predicted_seconds=item.predicted_seconds,
        observed_gpus=item.observed_gpus,
        observed_seconds=item.observed_seconds,
        own_price=item.price,
        prices=prices,
    )


def priced(items: Iterable[Reconciliation], prices: PriceTable | None) -> list[Reconciliation]:
    """The items with their cost."""
    return [dataclasses.replace(item, cost=cost_of(item, prices)) for item in items]


def spend_rows(
    items: Sequence[Reconciliation], by: str | None, prices: PriceTable | None = None
) -> tuple[SpendRow, ...]:
    """Per group (sorted by name; one group "all" when `by` is None), one row per currency
    the group's runs were compared in, then one of the runs that could not be."""
    key = SPEND_GROUPINGS[by] if by is not None else (lambda _item: ALL)
    groups: dict[str, list[RunCost]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(cost_of(item, prices))
    return tuple(SpendRow(name, total) for name in sorted(groups) for total in totals(groups[name]))


def unpriced_gpus(items: Iterable[Reconciliation], prices: PriceTable | None) -> tuple[str, ...]:
    """The GPUs of runs with a side that has no price (the prices file lacks them)."""
    found = set()
    for item in items:
        cost = cost_of(item, prices)
        if cost.planned_cost is None or cost.observed_cost is None:
            found.add(item.gpu)
    return tuple(sorted(found))


def in_two_currencies(items: Iterable[Reconciliation], prices: PriceTable | None) -> int:
    """Runs whose plan was priced in another currency than what they cost."""
    count = 0
    for item in items:
        cost = cost_of(item, prices)
        planned, observed = cost.planned_currency, cost.observed_currency
        count += planned is not None and observed is not None and planned != observed
    return count
