"""Commands that connect the runs a team already has: import (learn from past runs) and
launch (run a training command inside a linked MLflow run, no code change)."""

from __future__ import annotations

import click

from service.domain.errors import ConflictError
from service.entrypoints.cli.base import application, cli, json_option, output
from service.presenters import json_loop, text_loop

IMPORT_HELP = """Learn from past runs: store a retrospective estimate (what the published
prior predicts for the run's configuration, dated at the run's start) for each FINISHED run
that no estimate claims and whose configuration is complete (read from the run's reckon.*
tags or params, then from what its logging profile derives, else from --gpu/--gpus/
--precision), link it, and reconcile it through the ordinary pass before returning.
Importing twice imports nothing new; retrospective rows feed the refit but are kept apart
from forecasts in `reckon accuracy`. Profiles: Hugging Face Trainer, Composer, Lightning,
NeMo/Megatron, torchtitan-style and Reckon's own (see README "Connect your runs")."""

LAUNCH_HELP = """Run CMD inside an MLflow run linked to estimate ID, without touching the
training code. The run is created with the tag reckon.estimate_id and the estimate's
configuration as the plan (reckon.planned.*; what the run logs decides its factors);
--precision P tags what the job trains in and sets RECKON_PRECISION. CMD runs with
MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID, MLFLOW_EXPERIMENT_NAME, MLFLOW_TAGS,
MLFLOW_TRACKING_URI and RECKON_ESTIMATE_ID set, so
MLflow's fluent API and Hugging Face's callback log into it (and the run-context plugin
tags any run a framework starts itself, as Lightning does). SIGINT/SIGTERM are passed on.
The run ends FINISHED (exit 0), KILLED (a signal) or FAILED (any other code), and launch
exits with CMD's code. The experiment is --experiment, else MLFLOW_EXPERIMENT_NAME, else
the first of RECKON_EXPERIMENTS. Example: reckon launch --estimate ID -- torchrun train.py"""


@cli.command(name="import", help=IMPORT_HELP)
@click.option(
    "--experiment", "experiments", multiple=True, help="Only this experiment (repeatable)."
)
@click.option("--since", default=None, help="Only runs that ended after this date (or 30d).")
@click.option("--gpu", default=None, help="GPU model for runs that do not say (tag reckon.gpu).")
@click.option(
    "--gpus", type=click.IntRange(1), default=None, help="GPU count for runs that do not say."
)
@click.option("--precision", default=None, help="Precision for runs that do not say.")
@click.option("--dry-run", is_flag=True, help="Show what would be imported; store nothing.")
@json_option
def import_command(
    experiments: tuple[str, ...],
    since: str | None,
    gpu: str | None,
    gpus: int | None,
    precision: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    outcome = application().loop.import_runs(
        experiments=experiments, since=since, gpu=gpu, gpus=gpus, precision=precision,
        dry_run=dry_run,
    )  # fmt: skip
    output(as_json, outcome, json_loop.import_view, text_loop.import_text)
    if outcome.pass_status == "locked":  # stored, not yet reconciled: say so in the exit code
        raise ConflictError("another reconcile pass holds the lock; the next pass reconciles")


@cli.command(
    name="launch",
    help=LAUNCH_HELP,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--estimate", "estimate_id", required=True, help="The estimate the run is for.")
@click.option("--experiment", default=None, help="MLflow experiment name for the run.")
@click.option(
    "--precision",
    default=None,
    help="What the job trains in, when its framework does not log it (tagged as observed).",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def launch_command(
    estimate_id: str, experiment: str | None, precision: str | None, command: tuple[str, ...]
) -> int:
    outcome = application().loop.launch(
        estimate_id, command, experiment=experiment, precision=precision
    )
    click.echo(
        f"reckon: run {outcome.run_id} ended {outcome.status} (exit {outcome.exit_code})",
        err=True,
    )
    return outcome.exit_code
