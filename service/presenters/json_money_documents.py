"""The JSON documents of money planned against spent (presenters/money.py's views: a history
row's cost, an accuracy group's and the spend's totals per currency) as TypedDicts, under the
same rules as json_loop_documents.py: each forbids keys it does not declare, keys keep the
order the views emit them in, and only the API imports this at run time."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

FORBID = ConfigDict(extra="forbid")
PriceFrom = Literal["estimate", "prices_file"]


@with_config(FORBID)
class RunCost(TypedDict):
    """Planned and observed GPU-hours and cost of one reconciled estimate (null: no price)."""

    planned_gpu_hours: float | None
    observed_gpu_hours: float | None
    planned_cost: float | None
    planned_currency: str | None
    planned_price_per_gpu_hour: float | None
    planned_price_from: PriceFrom | None
    observed_cost: float | None
    observed_currency: str | None
    observed_price_per_gpu_hour: float | None
    observed_price_from: PriceFrom | None
    difference: float | None
    difference_pct: float | None


@with_config(FORBID)
class CostTotal(TypedDict):
    """Planned against observed cost of some runs in one currency; currency null: not compared."""

    currency: str | None
    runs: int
    planned_gpu_hours: float
    observed_gpu_hours: float
    planned_cost: float | None
    observed_cost: float | None
    difference: float | None
    difference_pct: float | None


@with_config(FORBID)
class SpendGroup(TypedDict):
    """One group's planned against observed cost in one currency (CostTotal's keys)."""

    group: str
    currency: str | None
    runs: int
    planned_gpu_hours: float
    observed_gpu_hours: float
    planned_cost: float | None
    observed_cost: float | None
    difference: float | None
    difference_pct: float | None


@with_config(FORBID)
class Spend(TypedDict):
    """Money planned against spent per group and currency, the totals, what was not compared."""

    by: Literal["experiment", "gpu", "month"] | None
    since: str | None
    gpu: str | None
    groups: list[SpendGroup]
    totals: list[CostTotal]
    unpriced_gpus: list[str]
    in_two_currencies: int
    imported_left_out: int
    prices_file: bool
    note: str | None
