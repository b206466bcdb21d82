"""Money planned against spent, pure: the cost of one reconciled estimate and per-currency
totals. No I/O; amounts of two currencies are never added (a currency is a label).

- Planned GPU-hours = the planned GPU count × the predicted wall time; observed GPU-hours =
  the observed GPU count (the plan's when the run stated none) × the observed wall time, the
  span from the first run's start to the last run's end that the time error uses: FAILED and
  KILLED segments, and the restarts between them, count, as an allocation held through them
  is paid for.
- Planned cost = planned GPU-hours × the estimate's own price (`--price-per-gpu-hour`, in the
  estimate's currency) when it was saved with one, else the prices file's price of its GPU.
  Observed cost = observed GPU-hours × the prices file's price of the GPU, else the
  estimate's own price. No price: no cost (None, never 0).
- The difference (observed − planned) and its share of the plan exist only when both costs
  are known in one currency."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from service.domain.prices import Price, PriceTable

SECONDS_PER_HOUR = 3600.0
PriceFrom = Literal["estimate", "prices_file"]


@dataclass(frozen=True)
class RunCost:
    """Planned and observed GPU-hours and cost of one reconciled estimate, each price and
    where it came from; `difference` = observed − planned cost (None unless both are known
    in one currency), `difference_pct` its share of the planned cost (> 0: over budget)."""

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

    @property
    def currency(self) -> str | None:
        """The one currency both costs are in; None when they cannot be compared."""
        return self.planned_currency if self.difference is not None else None


@dataclass(frozen=True)
class CostTotal:
    """Planned against observed cost of `runs` runs in one currency. `currency` None: the
    runs that cannot be compared (a side without a price, or its two sides in two
    currencies), with their GPU-hours and no cost."""

    currency: str | None
    runs: int
    planned_gpu_hours: float
    observed_gpu_hours: float
    planned_cost: float | None
    observed_cost: float | None
    difference: float | None
    difference_pct: float | None


def run_cost(
    *,
    gpu: str,
    planned_gpus: int | None,
    predicted_seconds: float,
    observed_gpus: int | None,
    observed_seconds: float,
    own_price: Price | None,
    prices: PriceTable | None,
) -> RunCost:
    """The cost of one reconciled estimate on `gpu` (the module's docstring says how)."""
    listed = None if prices is None else prices.price_of(gpu)
    planned_price, planned_from = _first((own_price, "estimate"), (listed, "prices_file"))
    observed_price, observed_from = _first((listed, "prices_file"), (own_price, "estimate"))
    planned_hours = _gpu_hours(planned_gpus if planned_gpus is not None else observed_gpus,
                               predicted_seconds)  # fmt: skip
    observed_hours = _gpu_hours(observed_gpus if observed_gpus is not None else planned_gpus,
                                observed_seconds)  # fmt: skip
    planned, planned_rate = _cost(planned_hours, planned_price)
    observed, observed_rate = _cost(observed_hours, observed_price)
    difference = None
    if (
        planned is not None
        and observed is not None
        and planned_price is not None
        and observed_price is not None
        and planned_price.currency == observed_price.currency
    ):
        difference = observed - planned
    return RunCost(
        planned_gpu_hours=planned_hours,
        observed_gpu_hours=observed_hours,
        planned_cost=planned,
        planned_currency=None if planned_price is None else planned_price.currency,
        planned_price_per_gpu_hour=planned_rate,
        planned_price_from=planned_from,
        observed_cost=observed,
        observed_currency=None if observed_price is None else observed_price.currency,
        observed_price_per_gpu_hour=observed_rate,
        observed_price_from=observed_from,
        difference=difference,
        difference_pct=_share(difference, planned),
    )  # fmt: skip


def totals(costs: Iterable[RunCost]) -> tuple[CostTotal, ...]:
    """One total per currency (in alphabetical order) over the runs compared in it, then
    one (currency None) over the runs that cannot be compared, when there are any."""
    by_currency: dict[str | None, list[RunCost]] = defaultdict(list)
    for cost in costs:
        by_currency[cost.currency].append(cost)
    named = sorted(key for key in by_currency if key is not None)
    found = [_total(currency, by_currency[currency]) for currency in named]
    if None in by_currency:
        found.append(_total(None, by_currency[None]))
    return tuple(found)


def _total(currency: str | None, costs: list[RunCost]) -> CostTotal:
    planned = observed = difference = None
    if currency is not None:  # every one of these has both costs
        planned = sum(cost.planned_cost or 0.0 for cost in costs)
        observed = sum(cost.observed_cost or 0.0 for cost in costs)
        difference = observed - planned
    return CostTotal(
        currency=currency,
        runs=len(costs),
        planned_gpu_hours=sum(cost.planned_gpu_hours or 0.0 for cost in costs),
        observed_gpu_hours=sum(cost.observed_gpu_hours or 0.0 for cost in costs),
        planned_cost=planned,
        observed_cost=observed,
        difference=difference,
        difference_pct=_share(difference, planned),
    )


def _first(
    *choices: tuple[Price | None, PriceFrom],
) -> tuple[Price | None, PriceFrom | None]:
    for price, source in choices:
        if price is not None:
            return price, source
    return None, None


def _gpu_hours(gpus: int | None, seconds: float) -> float | None:
    return None if gpus is None else gpus * seconds / SECONDS_PER_HOUR


def _cost(gpu_hours: float | None, price: Price | None) -> tuple[float | None, float | None]:
    """The cost and the price per GPU-hour it was at (None: no price, or no GPU count)."""
    rate = None if price is None else price.price_per_gpu_hour
    return (None if gpu_hours is None or rate is None else gpu_hours * rate), rate


def _share(difference: float | None, planned: float | None) -> float | None:
    """100 × difference ÷ planned; None without both, or against a plan of nothing."""
    if difference is None or planned is None or planned <= 0:
        return None
    return 100.0 * difference / planned
