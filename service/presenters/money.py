"""Money planned against spent, presented: a history row's cost, an accuracy group's and the
spend's totals per currency, as JSON (the documents of json_money_documents.py, imported for
type checking only) and as the CLI's text. Amounts print with two decimals and their
currency; amounts of two currencies are never added."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from service.domain.money import CostTotal, RunCost
from service.domain.spending import ALL
from service.domain.values import fields_of

if TYPE_CHECKING:
    from service.presenters import json_money_documents as moneydoc
    from service.usecases.results.reads import Spend

NO_PRICES = (
    "no prices: name a prices file in RECKON_PRICES_FILE (README, Configuration), or save "
    "estimates with --price-per-gpu-hour"
)


# --- JSON -----------------------------------------------------------------------------------


def cost_view(cost: RunCost) -> moneydoc.RunCost:
    return cast("moneydoc.RunCost", fields_of(cost))  # tests/unit/test_json_documents.py


def cost_totals_view(found: Sequence[CostTotal]) -> list[moneydoc.CostTotal]:
    return [cast("moneydoc.CostTotal", fields_of(total)) for total in found]


def spend_view(spend: Spend) -> moneydoc.Spend:
    document = {
        "by": spend.by,  # one of service.domain.spending.SPEND_GROUPINGS
        "since": None if spend.since is None else spend.since.isoformat(),
        "gpu": spend.gpu,
        "groups": [
            cast("moneydoc.SpendGroup", {"group": row.group, **fields_of(row.total)})
            for row in spend.rows
        ],
        "totals": cost_totals_view(spend.totals),
        "unpriced_gpus": list(spend.unpriced_gpus),
        "in_two_currencies": spend.in_two_currencies,
        "imported_left_out": spend.imported_left_out,
        "prices_file": spend.prices_file,
        "note": spend_note(spend),
    }
    return cast("moneydoc.Spend", document)


# --- text -----------------------------------------------------------------------------------


def amount(value: float | None, currency: str | None) -> str:
    return "-" if value is None or currency is None else f"{value:,.2f} {currency}"


def _signed(value: float | None, share: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:+,.2f}" + ("" if share is None else f" ({share:+.1f}%)")


def cost_phrase(cost: RunCost | None) -> str:
    """A history line's ending: what the run was planned to cost and cost ("" unpriced)."""
    if cost is None or (cost.planned_cost is None and cost.observed_cost is None):
        return ""
    planned = amount(cost.planned_cost, cost.planned_currency)
    observed = amount(cost.observed_cost, cost.observed_currency)
    share = "" if cost.difference_pct is None else f" ({cost.difference_pct:+.1f}%)"
    return f" cost {planned} planned, {observed} spent{share}"


def cost_lines(rows: Sequence[tuple[str, Sequence[CostTotal]]], title: str = "cost") -> list[str]:
    """A table of planned against observed cost: one line per group and currency (the runs
    that could not be compared: currency "-", their GPU-hours, no amounts)."""
    lines = [
        f"{title:<22} {'currency':<8} {'runs':>5} {'GPU-h planned':>15} {'GPU-h observed':>15} "
        f"{'planned':>16} {'observed':>16}  difference"
    ]
    for name, found in rows:
        for total in found:
            lines.append(
                f"{name:<22} {total.currency or '-':<8} {total.runs:>5} "
                f"{total.planned_gpu_hours:>15,.0f} {total.observed_gpu_hours:>15,.0f} "
                f"{_plain(total.planned_cost):>16} {_plain(total.observed_cost):>16}  "
                + (_signed(total.difference, total.difference_pct) if total.currency
                   else "not priced")
            )  # fmt: skip
    return lines


def _plain(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def priced_anywhere(rows: Sequence[tuple[str, Sequence[CostTotal]]]) -> bool:
    return any(total.currency is not None for _name, found in rows for total in found)


def spend_note(spend: Spend) -> str | None:
    """What was not compared, and why, in one line (None: everything was)."""
    parts = []
    if not spend.prices_file and not any(total.currency for total in spend.totals):
        parts.append(NO_PRICES)
    elif spend.unpriced_gpus:
        where = "the prices file" if spend.prices_file else "RECKON_PRICES_FILE (not set)"
        parts.append(f"no price for {', '.join(spend.unpriced_gpus)} in {where}")
    if spend.in_two_currencies:
        parts.append(
            f"{spend.in_two_currencies:,} runs planned in another currency than they cost "
            "(never converted, not compared)"
        )
    if spend.imported_left_out:
        parts.append(f"{spend.imported_left_out:,} imported runs left out (never a budget)")
    return "; ".join(parts) or None


def spend_text(spend: Spend) -> str:
    if not spend.rows:
        note = spend_note(spend)
        return "no reconciled forecasts to price" + (f"; {note}" if note else "")
    runs = ["reconciled forecasts"]
    if spend.gpu:
        runs.append(f"on {spend.gpu}")
    if spend.since is not None:
        runs.append(f"that ended since {spend.since:%Y-%m-%d %H:%M} UTC")
    scope = f" by {spend.by}" if spend.by else ""
    lines = [f"spend{scope}: {' '.join(runs)} (cost = GPU-hours x price per GPU-hour)"]
    grouped: list[tuple[str, list[CostTotal]]] = []
    for row in spend.rows:
        if not grouped or grouped[-1][0] != row.group:
            grouped.append((row.group, []))
        grouped[-1][1].append(row.total)
    if spend.by is not None:
        grouped.append((ALL, list(spend.totals)))
    lines += cost_lines(grouped, "group")
    note = spend_note(spend)
    if note:
        lines += ["", note]
    return "\n".join(lines)
