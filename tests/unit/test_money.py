"""Issue 23 item 3, the arithmetic (service.domain.money, prices, spending): planned and
observed cost of a reconciled estimate, totals per currency (never one across two), the
prices file read against the catalog, and the spend's groups."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from service.domain import comparison
from service.domain.errors import InputError
from service.domain.hardware import build_catalog
from service.domain.money import RunCost, run_cost, totals
from service.domain.prices import Price, PriceTable, load_prices, read_prices
from service.domain.records import ObservedRun, SavedEstimate
from service.domain.spending import spend_rows
from tests.builders import NOW, an_estimate

CATALOG = build_catalog()
FILE = PriceTable({"h100-sxm": Price(2.5, "USD"), "a100-80gb": Price(1.5, "EUR")}, "USD", "p")
HOUR = 3600.0


def cost(**overrides: object) -> RunCost:
    fields: dict[str, object] = {
        "gpu": "h100-sxm", "planned_gpus": 8, "predicted_seconds": 10 * HOUR,
        "observed_gpus": None, "observed_seconds": 12 * HOUR, "own_price": None, "prices": FILE,
    }  # fmt: skip
    return run_cost(**{**fields, **overrides})  # type: ignore[arg-type]


def test_planned_and_observed_cost_are_gpu_hours_at_the_files_price() -> None:
    found = cost()

    assert (found.planned_gpu_hours, found.observed_gpu_hours) == (80.0, 96.0)
    assert (found.planned_cost, found.observed_cost) == (200.0, 240.0)
    assert (found.planned_currency, found.observed_currency, found.currency) == ("USD",) * 3
    assert found.difference == 40.0 and found.difference_pct == pytest.approx(20.0)
    assert (found.planned_price_from, found.observed_price_from) == ("prices_file",) * 2


def test_the_observed_gpu_count_prices_what_ran() -> None:
    found = cost(observed_gpus=16)  # planned 8, ran on 16

    assert found.observed_gpu_hours == 16 * 12 and found.observed_cost == 16 * 12 * 2.5
    assert found.planned_cost == 200.0


def test_an_estimates_own_price_sets_its_plan_and_the_file_prices_the_run() -> None:
    own = Price(3.0, "USD")

    found = cost(own_price=own)
    without_file = cost(own_price=own, prices=None)

    assert found.planned_cost == 240.0 and found.planned_price_from == "estimate"
    assert found.observed_cost == 240.0 and found.observed_price_from == "prices_file"
    assert found.difference == 0.0
    # No file (or no price for the GPU in it): the estimate's price prices the run too.
    assert without_file.observed_cost == 288.0 and without_file.observed_price_from == "estimate"


def test_no_price_is_no_cost_never_zero_and_a_price_of_zero_is_a_price() -> None:
    unpriced = cost(gpu="v100")
    free = cost(own_price=Price(0.0, "USD"), prices=None)

    assert unpriced.planned_cost is None and unpriced.observed_cost is None
    assert unpriced.difference is None and unpriced.currency is None
    assert unpriced.planned_gpu_hours == 80.0
    assert (free.planned_cost, free.observed_cost, free.difference) == (0.0, 0.0, 0.0)
    assert free.difference_pct is None  # no share of a plan of nothing


def test_two_currencies_are_never_compared() -> None:
    found = cost(gpu="a100-80gb", own_price=Price(2.0, "USD"))  # the file says EUR

    assert (found.planned_currency, found.observed_currency) == ("USD", "EUR")
    assert found.difference is None and found.difference_pct is None and found.currency is None


def test_failed_segments_and_the_restart_gap_are_paid_for() -> None:
    """Observed GPU-hours span the first start to the last end (the time error's span)."""
    result = an_estimate(gpu="h100-sxm", gpus=8)
    saved = SavedEstimate(
        "e1", "computed", NOW, "h100-sxm", 8, "bf16", result.wall_seconds, estimate=result
    )
    start = NOW + timedelta(days=1)

    def run(run_id: str, begins: float, ends: float, status: str) -> ObservedRun:
        return ObservedRun(
            run_id, "1", status, start + timedelta(hours=begins), start + timedelta(hours=ends),
            "e1", None,
        )  # fmt: skip

    runs = [run("a", 0, 5, "FAILED"), run("b", 6, 30, "FINISHED")]
    item = comparison.reconcile(saved, runs)
    assert item is not None
    found = cost(predicted_seconds=item.predicted_seconds, observed_seconds=item.observed_seconds)

    assert item.failed_segments == 1 and found.observed_gpu_hours == pytest.approx(8 * 30)


def test_totals_are_per_currency_and_never_add_two() -> None:
    found = totals(
        [cost(), cost(), cost(gpu="a100-80gb"), cost(gpu="v100"), cost(own_price=Price(1, "EUR"))]
    )

    eur, usd, not_compared = found  # currencies in alphabetical order, then the rest
    assert (usd.currency, usd.runs, usd.planned_cost, usd.observed_cost) == ("USD", 2, 400, 480)
    assert usd.difference == 80.0 and usd.difference_pct == pytest.approx(20.0)
    assert (eur.currency, eur.runs, eur.planned_cost) == ("EUR", 1, 120.0)
    assert not_compared.currency is None and not_compared.runs == 2
    assert not_compared.planned_cost is None and not_compared.planned_gpu_hours == 160.0
    assert totals([]) == ()


def test_the_prices_file_resolves_aliases_and_takes_a_currency_per_entry(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        'currency = "eur"\n[gpu.h100]\nprice_per_gpu_hour = 2\n'
        '[gpu."NVIDIA A100-SXM4-80GB"]\nprice_per_gpu_hour = 1.25\ncurrency = "USD"\n',
        encoding="utf-8",
    )

    table = load_prices(path, CATALOG)

    assert table.currency == "EUR" and table.source == str(path)
    assert table.price_of("h100-sxm") == Price(2.0, "EUR")
    assert table.price_of("a100-80gb") == Price(1.25, "USD")
    assert table.price_of("v100") is None


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({}, "has no [gpu.NAME] tables"),
        ({"gpu": {"h100": {"price_per_gpu_hour": True}}}, "must be a number"),
        ({"gpu": {"h100": {"price_per_gpu_hour": float("inf")}}}, "zero or more"),
        ({"gpu": {"h100": {}}}, "needs price_per_gpu_hour"),
        ({"gpu": {"h100": 2.5}}, "expected a table"),
        ({"gpu": {"h100": {"price_per_gpu_hour": 1, "currency": "US$"}}}, "3-letter code"),
        ({"gpu": {"nosuchgpu": {"price_per_gpu_hour": 1}}}, "unknown GPU 'nosuchgpu'"),
        ({"currency": "USD", "gpus": {}}, "unknown key 'gpus'"),
    ],
)
def test_a_mistake_in_the_prices_file_names_the_file_and_the_entry(
    document: dict[str, object], says: str
) -> None:
    with pytest.raises(InputError, match=r"^prices file p") as raised:
        read_prices(document, CATALOG, shown="prices file p")

    assert says in str(raised.value)


def test_an_unreadable_prices_file_says_which_variable_named_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot read prices file .*RECKON_PRICES_FILE"):
        load_prices(tmp_path / "missing.toml", CATALOG)


def test_spend_rows_group_by_experiment_gpu_and_month_per_currency() -> None:
    result = an_estimate(gpu="h100-sxm", gpus=8)
    saved = SavedEstimate(
        "e1", "computed", NOW, "h100-sxm", 8, "bf16", result.wall_seconds, estimate=result
    )
    end = NOW + timedelta(seconds=result.wall_seconds)
    item = comparison.reconcile(saved, [ObservedRun("r", "1", "FINISHED", NOW, end, "e1", None)])
    assert item is not None
    items = [
        dataclasses.replace(item, experiment_id="7"),
        dataclasses.replace(item, experiment_id=None, gpu="v100"),
        dataclasses.replace(item, experiment_id="7", ended_at=end + timedelta(days=40)),
    ]

    by_experiment = spend_rows(items, "experiment", FILE)
    by_month = spend_rows(items, "month", FILE)
    overall = spend_rows(items, None, FILE)

    assert [(r.group, r.total.currency, r.total.runs) for r in by_experiment] == [
        ("7", "USD", 2), ("unknown", None, 1),
    ]  # fmt: skip
    assert [r.group for r in by_month] == [f"{end:%Y-%m}"] * 2 + [
        f"{end + timedelta(days=40):%Y-%m}"
    ]
    assert [(r.group, r.total.currency) for r in overall] == [("all", "USD"), ("all", None)]
