"""Commands of the loop: reconcile, history, spend, running, forecast, refit, factors,
accuracy."""

from __future__ import annotations

import sys

import click

from service.domain.errors import ConflictError
from service.domain.records import ACCURACY_ALIASES, ACCURACY_GROUPINGS, HISTORY_SORTS
from service.domain.spending import SPEND_GROUPINGS
from service.entrypoints.cli.base import (
    application,
    cli,
    csv_option,
    emit_csv,
    json_option,
    one_format,
    output,
)
from service.presenters import csv_tables, json_loop, json_views, money, text_loop


@cli.command()
@click.option("--since", default=None, help="Rescan runs that ended after this date (backfill).")
@click.option("--full", is_flag=True, help="Rescan every run MLflow has.")
@json_option
def reconcile(since: str | None, full: bool, as_json: bool) -> None:
    """One pass now: pull finished runs from MLflow, compare, store (as the scheduler does)."""
    show_progress = not as_json and sys.stderr.isatty()
    outcome = application().loop.reconcile(
        trigger="cli", since=since, full=full, on_progress=_progress if show_progress else None
    )
    if show_progress:
        click.echo("", err=True)
    if outcome.status == "locked":  # exit 4, so a CronJob does not report a pass that never ran
        raise ConflictError(outcome.summary)
    output(as_json, outcome, json_loop.outcome_view, text_loop.outcome_text)


def _progress(runs_seen: int) -> None:
    click.echo(f"\rscanned {runs_seen:,} runs", err=True, nl=False)


@cli.command()
@json_option
def forecast(as_json: bool) -> None:
    """Forecast every linked RUNNING run now and tag it in MLflow (reckon.eta, reckon.eta_p10,
    reckon.eta_p90, reckon.at_risk) through the outbox: the hourly job, once. Another forecast
    run holding the lock exits 4 and does nothing; the nightly pass's lock is never waited on."""
    done = application().loop.forecast()
    if done.locked:
        raise ConflictError(text_loop.forecast_text(done))
    output(as_json, done, json_loop.forecast_view, text_loop.forecast_text)


@cli.command(name="running")
@json_option
def running_command(as_json: bool) -> None:
    """Linked runs still RUNNING, with a projected finish against the plan."""
    output(
        as_json,
        application().queries.running(),
        json_views.running_list_view,
        text_loop.running_text,
    )


@cli.command()
@click.option("--since", default=None, help="Only runs that ended after this date.")
@click.option("--gpu", default=None, help="Only this GPU model.")
@click.option("--limit", type=click.IntRange(1, 1_000_000), default=None, help="At most N rows.")
@click.option("--offset", type=click.IntRange(0), default=0, help="Skip the first N rows.")
@click.option(
    "--sort", type=click.Choice(HISTORY_SORTS), default="newest", show_default=True,
    help="Run end (newest, oldest) or |error| (worst, best) first.",
)  # fmt: skip
@click.option(
    "--search", default=None, help="Only rows whose estimate id, label, run ids, GPU or "
    "precision contain this (case-insensitive).",
)  # fmt: skip
@json_option
@csv_option
def history(
    since: str | None,
    gpu: str | None,
    limit: int | None,
    offset: int,
    sort: str,
    search: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Predicted against observed, per estimate, newest first (or --sort), with what each
    was planned to cost and cost (prices: RECKON_PRICES_FILE, or the estimate's own)."""
    one_format(as_json, as_csv)
    page = application().queries.history_page(
        since=since, gpu=gpu, search=search, sort=sort, limit=limit, offset=offset
    )
    if as_csv:
        emit_csv(csv_tables.history_csv(page))
        return
    output(as_json, page, json_views.history_page_view, text_loop.history_page_text)


@cli.command(name="spend")
@click.option(
    "--by", type=click.Choice(list(SPEND_GROUPINGS)), default=None,
    help="Group by MLflow experiment (id), GPU model or month the run ended (UTC).",
)  # fmt: skip
@click.option("--since", default=None, help="Only runs that ended after this date (or 30d).")
@click.option("--gpu", default=None, help="Only this GPU model (an alias such as h100 works).")
@json_option
@csv_option
def spend_command(
    by: str | None, since: str | None, gpu: str | None, as_json: bool, as_csv: bool
) -> None:
    """Budget against actual: planned and observed cost (GPU-hours x price per GPU-hour) of
    the reconciled forecasts, per group and currency, and the difference."""
    one_format(as_json, as_csv)
    result = application().queries.spend(by=by, since=since, gpu=gpu)
    if as_csv:
        emit_csv(csv_tables.spend_csv(result))
        return
    output(as_json, result, money.spend_view, money.spend_text)


@cli.command()
@click.option("--force", is_flag=True, help="Activate the new set even if its backtest is worse.")
@json_option
def refit(force: bool, as_json: bool) -> None:
    """Fit utilization and overhead per segment from the reconciled history now."""
    output(
        as_json, application().loop.refit(force=force), json_loop.refit_view, lambda o: o.message
    )


@cli.group(invoke_without_command=True)
@click.option(
    "--version",
    "--factor-set",
    "version",
    type=int,
    default=None,
    help="This version, not the active one (--factor-set is the same option, named as in "
    "`reckon estimate`).",
)
@json_option
@click.pass_context
def factors(ctx: click.Context, version: int | None, as_json: bool) -> None:
    """The factor set per segment: utilization, overhead, their P10-P90 ranges, n, level.
    `reckon factors list` shows every set; `reckon factors activate N` makes N active."""
    if ctx.invoked_subcommand is None:
        answer = application().factor_sets.show(version)
        output(as_json, answer, json_loop.factors_view, text_loop.factors_text)


@factors.command(name="list")
@json_option
def factors_list(as_json: bool) -> None:
    """Every factor set: version, created, active, backtest scores, n."""
    output(
        as_json,
        application().factor_sets.history(),
        json_loop.factor_history_view,
        text_loop.sets_text,
    )


@factors.command(name="activate")
@click.argument("version", type=int)
@json_option
def factors_activate(version: int, as_json: bool) -> None:
    """Make factor set VERSION the active one (a rollback, or a roll forward). It stays active
    until a newer set passes the refit's gate against it; activate another to undo."""
    answer = application().factor_sets.activate(version)
    output(as_json, answer, json_loop.factors_view, text_loop.factors_text)


@cli.command(name="accuracy")
@click.option(
    "--by",
    type=click.Choice([*ACCURACY_GROUPINGS, *ACCURACY_ALIASES]),
    default=None,
    help="Group the scores. `gpu` is an alias of `gpu_type` (the GPU model, as --gpu names "
    "it elsewhere), not of a GPU count.",
)
@click.option("--since", default=None, help="Only runs that ended after this date.")
@json_option
def accuracy_command(by: str | None, since: str | None, as_json: bool) -> None:
    """How wrong were we: n, median APE, MAPE, bias and P10-P90 coverage, raw and calibrated."""
    result = application().queries.accuracy(by=by, since=since)
    output(as_json, result, json_loop.accuracy_view, text_loop.accuracy_text)
