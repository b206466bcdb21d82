"""Commands on stored predictions: record, link, estimates list / show."""

from __future__ import annotations

import click

from service.domain.redaction import terminal_safe
from service.domain.units import parse_duration_seconds
from service.entrypoints.cli.base import application, cli, emit_json, json_option, output
from service.presenters import json_views, text


@cli.command()
@click.option("--predicted", required=True, help="The planner's predicted wall time: 3.5d, 80h.")
@click.option("--gpu", required=True, help="GPU model the run uses.")
@click.option("--gpus", type=int, required=True, help="Number of GPUs.")
@click.option("--precision", default="bf16", show_default=True, help="Numeric precision.")
@click.option("--label", default=None, help="A short note stored with the prediction.")
@json_option
def record(
    predicted: str, gpu: str, gpus: int, precision: str, label: str | None, as_json: bool
) -> None:
    """Store a planner's own (external) prediction; prints its id."""
    saved = application().registry.record(
        predicted_seconds=parse_duration_seconds(predicted),
        gpu=gpu,
        gpus=gpus,
        precision=precision,
        label=label,
    )
    if as_json:
        emit_json(json_views.saved_view(saved))
        return
    click.echo(saved.id)
    click.echo(f"tag the training run with: {saved.mlflow_tag}", err=True)


FORCE_LINK = "Do not ask MLflow whether the run exists (it cannot be reached, or not yet)."
FORCE_UNLINK = (
    "Do not touch MLflow: the run keeps its reckon.estimate_id tag, so the next pass links "
    "it again unless the tag is removed."
)


@cli.command()
@click.argument("estimate_id")
@click.argument("run_id")
@click.option("--force", is_flag=True, help=FORCE_LINK)
def link(estimate_id: str, run_id: str, force: bool) -> None:
    """Link an MLflow run to an estimate after the fact. The run must exist in MLflow (exit
    3 if not, 5 if MLflow cannot be asked) unless --force."""
    created = application().registry.link(estimate_id, run_id, force=force)
    linked = f"linked run {run_id} to estimate {estimate_id}" if created else "already linked"
    click.echo(terminal_safe(linked))


@cli.command()
@click.argument("estimate_id")
@click.argument("run_id")
@click.option("--force", is_flag=True, help=FORCE_UNLINK)
@json_option
def unlink(estimate_id: str, run_id: str, force: bool, as_json: bool) -> None:
    """Undo a link: the run no longer counts for the estimate, its reckon.estimate_id tag is
    removed in MLflow, and the estimate's reconciliation is recomputed from its other runs."""
    done = application().registry.unlink(estimate_id, run_id, force=force)
    output(as_json, done, json_views.unlinked_view, text.unlinked_text)


@cli.group(name="estimates")
def estimates_group() -> None:
    """Stored predictions."""


@estimates_group.command(name="list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--gpu", default=None, help="Only this GPU model.")
@json_option
def estimates_list(limit: int, gpu: str | None, as_json: bool) -> None:
    """The newest stored predictions first."""
    saved = application().registry.list_estimates(limit=limit, gpu=gpu)
    output(as_json, saved, json_views.estimates_view, text.estimates_text)


@estimates_group.command(name="show")
@click.argument("estimate_id")
@json_option
def estimates_show(estimate_id: str, as_json: bool) -> None:
    """One stored prediction with every input and output, and its linked runs."""
    detail = application().registry.estimate_detail(estimate_id)
    output(as_json, detail, json_views.detail_view, text.detail_text)
